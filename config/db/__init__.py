"""Django's PostgreSQL backend with a connection pool that fails fast when the server is down."""
