"""Settings read from the environment, in one place, passed down as typed objects."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentq.orchestrator.core.fairness import Weight
from agentq.orchestrator.core.tenant_limits import TenantLimit


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTQ_", extra="ignore")

    redis_url: str = "memory://"
    # Queues and runs are split into this many partitions, each with its own Redis
    # Cluster hash tag (see core/keys.py). Fixed for a deployment: every process must
    # use the same. Unset: 1 on a single Redis, 16 on a cluster (`redis+cluster://`).
    partitions: int | None = Field(default=None, ge=1, le=1024)
    # How long a finished run's keys are kept.
    retention_s: int = Field(default=7 * 24 * 3600, gt=0)
    # Each worker process holds one lease of this length (renewed five times per lease
    # from a thread); a dead worker's jobs are re-delivered once it lapses, whatever the
    # calls' own timeouts: recovery takes about a lease. A worker that cannot renew in
    # time cancels its running jobs (they run again elsewhere). Raise it when Redis is
    # far away (a renewal must connect and answer within a fifth of it).
    lease_s: float = Field(default=1.0, gt=0)
    # A worker sleeps on its wake-up list; this is only the fallback poll.
    idle_poll_s: float = Field(default=1.0, gt=0)
    concurrency: int = Field(default=16, ge=1)
    # One step of a run's priority is worth this much waiting in its lane (core/fairness.py):
    # a `low` job is overtaken only by `high` jobs due less than 6 steps after it.
    priority_aging_s: float = Field(default=10.0, ge=0)
    # Each tenant's weight in the claim's round-robin over tenants, by tenant or `*`
    # (JSON, core/fairness.py): {"acme": 3} gives acme three jobs a turn for another's one.
    tenant_weights: dict[str, Weight] = Field(default_factory=dict)
    # On SIGTERM a worker stops claiming and lets its running jobs finish for this long;
    # what is still running then is released for another worker (not counted as a death).
    drain_timeout_s: float = Field(default=30.0, ge=0)
    # Every Redis connection: how long to wait for TCP (and TLS), for any reply, and how
    # often an idle pooled connection is checked before use. Blocking reads stay shorter.
    redis_connect_timeout_s: float = Field(default=5.0, gt=0)
    redis_socket_timeout_s: float = Field(default=10.0, gt=0)
    redis_health_check_s: float = Field(default=15.0, ge=0)
    # At most this many connections to Redis per process (unset: as many as needed), all
    # opened at first use. A caller past them waits its turn (first come, first served)
    # up to `redis_pool_wait_s`, then gets a retryable PoolBusyError (redis/bounded_pool.py).
    # `agentq serve` sets both (its `redis_connections` and `redis_wait_s`).
    redis_max_connections: int | None = Field(default=None, ge=2)
    redis_pool_wait_s: float = Field(default=30.0, gt=0)
    # How long a waiting client keeps reconnecting through an outage when the caller
    # gave it no timeout of its own.
    redis_retry_s: float = Field(default=60.0, gt=0)
    # How many replicas must have a transition (a run created, a step committed, a
    # result recorded, a job claimed or ended) before it is acknowledged (`WAIT`), and
    # how long to wait for them before the transition counts as failed (and is retried).
    # Unset: 1 while the primary reports a connected replica, else 0.
    redis_replica_acks: int | None = Field(default=None, ge=0)
    redis_replica_ack_timeout_s: float = Field(default=1.0, gt=0)
    # A job whose worker died this many times is not run again: a tool call becomes a
    # tool error the model sees, a model step fails the run (never a run stuck forever).
    max_deliveries: int = Field(default=5, ge=1)
    # A tool output larger than this is cut, with a marker the model sees (a tool
    # spec's `max_output_bytes` overrides it per tool).
    max_tool_output_bytes: int = Field(default=1_000_000, gt=0)
    # Each worker keeps the history it read for a run's step, so the run's next step on
    # it reads only the messages appended since (workers/steps/history_cache.py); at most this
    # many bytes of message JSON, least recently used runs evicted first. 0: none kept.
    history_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    # A run spec's JSON at most this many bytes, wherever it comes from: a batch line
    # over it is refused, naming the line (`agentq serve` applies its own
    # AGENTQ_SERVE_MAX_SPEC_BYTES to what it is sent).
    max_spec_bytes: int = Field(default=256_000, gt=0)
    # How long a parked call (awaiting approval or an outside result) waits before it
    # becomes a tool error the model sees; a tool spec's `park_timeout_s` overrides it.
    park_timeout_s: float = Field(default=24 * 3600.0, gt=0, le=7 * 24 * 3600.0)
    # Whether a code tool may ask for network (`"network": true`): the deployment's choice,
    # never a spec's. Checked at submit and again by the sandbox worker.
    sandbox_allow_network: bool = False
    mcp_config: str | None = None
    # Sub-agents (`agent` tools): how deep child runs may nest, how many one model step
    # may start, and a JSON file of named agents ({"name": {RunSpec template}}).
    max_agent_depth: int = Field(default=3, ge=0)
    max_agent_fanout: int = Field(default=8, ge=1)
    # ... and how many runs one run tree may hold in all, its top run included: a child
    # past it is refused with a tool error its parent's model sees.
    max_tree_runs: int = Field(default=100, ge=1)
    # ... and how many model steps its runs may take in all: the run that would take one
    # more fails (a `limit` error; a child's failure is a tool error its parent sees).
    # 100 runs of the default 10 steps.
    max_tree_steps: int = Field(default=1000, ge=1)
    agents: str | None = None
    # Ceilings on each run's budgets (unset: none): a spec's `limits` may be lower, never
    # higher (refused at submit); a spec without one gets the ceiling
    # (orchestrator/policy/budgets.py).
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    # Each tenant's submissions a minute, counted in Redis across the fleet: what
    # `agentq serve` admits (runs, tool calls, chat turns, batches; past it a 429) and the
    # sub-agents workers start for the tenant's runs (past it a tool error the parent sees).
    submits_per_minute: int = Field(default=600, ge=1)
    # Each tenant's runs in flight and queued at once, by tenant or `*` (JSON, see
    # core/tenant_limits.py): {"*": {"max_in_flight": 50, "max_queued": 200}}. A run past
    # a cap is refused (TenantLimitError, HTTP 429); a batch's lines wait instead.
    tenant_limits: dict[str, TenantLimit] = Field(default_factory=dict)
    # Each tenant's shared budget in USD and tokens, by tenant or `*` (JSON, read by
    # orchestrator/budgets/tenants.py): {"*": {"max_cost_usd": 100, "period": "day"}}
    # (period: day, month or, by default, total; UTC). Reached, its runs
    # hold at their next step and its submits are refused (HTTP 402) until it is raised
    # (`agentq budget tenant`).
    tenant_budgets: dict[str, dict[str, float | str]] = Field(default_factory=dict)
    # How long a step held by a shared budget waits before the sweeper (redrive_after_s
    # later) sends it again to check (a raise sends it at once).
    budget_recheck_s: float = Field(default=60.0, gt=0)
    # The remote-tools file: tools served by services in any language, their queues and
    # the queues' push webhooks (orchestrator/tools/remote.py). `agentq serve` reads it.
    remote_tools: str | None = None
    # The models file: the named model endpoints specs may use (orchestrator/policy/endpoints.py).
    models: str | None = None
    # Comma-separated base-URL prefixes a spec's `model.base_url` may start with, and
    # environment variables a spec's `model.api_key_env` may name. Empty: none.
    allow_spec_endpoints: str = ""
    allow_spec_key_envs: str = ""
    # Comma-separated hosts a spec's HTTP tools may reach: `api.example.com`,
    # `*.example.com` (its subdomains) or `*` (any public host). Loopback, private,
    # link-local and metadata addresses are refused unless a host is listed by its exact
    # name. Empty: no HTTP tools (and workers serve none).
    allow_http_hosts: str = ""
    # Comma-separated environment variables a spec may name: in an HTTP tool's headers
    # (`${env:NAME}`) and as a webhook's `secret_env`, read from the worker's environment.
    allow_http_envs: str = ""
    # The same host patterns for the URLs of a spec's webhooks. Empty: no webhooks.
    allow_webhook_hosts: str = ""
    # A webhook delivery is tried this many times (backoff: this many seconds, doubled
    # each time) before a `webhook-failed` event; each attempt waits this long at most.
    webhook_max_attempts: int = Field(default=5, ge=1, le=20)
    webhook_backoff_s: float = Field(default=1.0, ge=0, le=60)
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=120)
    # An embedded session (`agentq run`) waits this long at its end for the webhook
    # deliveries still due: its in-memory Redis, and the events, go with the process.
    embedded_webhook_wait_s: float = Field(default=30.0, ge=0, le=3600)
    # Provider quotas shared by the fleet: {"openai:gpt-4o": [rpm, tpm], "anthropic:*": [50, null]}.
    # A third value sets the window in seconds (default 60: "per minute"); a shorter one
    # scales the quota down for tests and benchmarks, e.g. [60, null, 1] is 60 per second.
    rate_limits: dict[str, tuple[int | None, int | None] | tuple[int | None, int | None, float]] = (
        Field(default_factory=dict)
    )
    # Provider batch APIs (`"model": {..., "batch": true}`): a collector submits a group's
    # parked requests once this many are waiting or the oldest has waited this long, polls
    # the provider this often, and holds its group under a lease of this length (another
    # worker takes a dead collector's group over when it lapses).
    provider_batch_max_requests: int = Field(default=1000, ge=1, le=50_000)
    provider_batch_max_age_s: float = Field(default=60.0, ge=0)
    provider_batch_poll_s: float = Field(default=10.0, gt=0)
    provider_batch_lease_s: float = Field(default=30.0, gt=0)
    # Every worker sweeps for runs that have not moved for this long and whose current step
    # has no job queued or held and nothing recorded (a failover dropped the job): their
    # step's jobs are enqueued again (orchestrator/runs/redrive.py); likewise calls without
    # a run, and batches and their lines whose admission job was lost. Well above a step's
    # normal hop; a pass looks at no more than `redrive_batch` entries per partition of
    # each.
    redrive_after_s: float = Field(default=30.0, gt=0)
    redrive_batch: int = Field(default=100, ge=1)
    # A schedule's tick claimed later than this after its time was missed (the fleet was
    # down): it fires once on recovery or not at all, per the schedule's `catchup`.
    schedule_grace_s: float = Field(default=10.0, ge=0)
    # An upload never sealed (`agentq batch`) expires this long after its last chunk.
    batch_upload_ttl_s: int = Field(default=24 * 3600, gt=0)
    # A thread's next run starts from at most this many of its history's messages: the
    # oldest turns beyond it are left out (the `drop_oldest` context strategy; the first
    # message, the thread's task, stays), so a long conversation stays bounded.
    thread_max_messages: int = Field(default=500, ge=2)
    # The price table, a JSON file: USD per million tokens by "provider:model" or
    # "endpoint:model" (orchestrator/cost/prices.py), over built-in list prices.
    prices: str | None = None
