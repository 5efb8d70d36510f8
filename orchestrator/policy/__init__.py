"""What a deployment allows: the provider table, model endpoints, egress, signing,
webhooks. A spec only chooses among what these offer."""
