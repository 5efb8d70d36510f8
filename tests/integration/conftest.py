from tests.support.redis_fixtures import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]
