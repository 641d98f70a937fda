"""The Kafka transport (``TIDINGS_TRANSPORT=kafka``): topic names, tickets, client settings
and offset bookkeeping shared by the relay and the workers (docs/architecture.md, Kafka
transport). The database stays the truth; the broker only carries work."""
