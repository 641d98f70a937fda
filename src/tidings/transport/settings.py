"""The Kafka transport's settings (``[kafka]``), read by the relay and the workers."""

from __future__ import annotations

from pydantic import BaseModel, Field


class KafkaSettings(BaseModel):
    # Created when missing, per topic; more partitions let more workers share a topic.
    partitions: int = Field(default=6, ge=1, le=1_000)
    replication_factor: int = Field(default=1, ge=1, le=10)
    # How long a published delivery may wait for a worker before the reaper, taking its
    # message for lost (a broker that lost its log), gives it back to the relay.
    queue_lease_seconds: float = Field(default=300.0, gt=0, le=86_400)
    # Deliveries a topic may hold at once (QUEUED); the relay publishes no more until the
    # workers take some. Keep it below what the workers drain in a queue lease.
    max_queued: int = Field(default=20_000, ge=1, le=10_000_000)
    # Keep at most what the workers drain in half a queue lease in a topic, so that a
    # backlog waits PENDING instead of expiring in the topic (transport/pacing.py). Off:
    # only max_queued bounds a topic (a benchmark of the relay with no workers).
    paced: bool = True
    # Deliveries claimed and published per relay transaction.
    relay_batch: int = Field(default=500, ge=1, le=10_000)
    # How long the relay's producer waits to fill a batch, and the workers' fetch wait.
    linger_ms: int = Field(default=2, ge=0, le=1_000)
    fetch_wait_ms: int = Field(default=20, ge=1, le=10_000)
    # How often a worker commits the offsets of messages whose outcome is written.
    commit_interval: float = Field(default=0.5, gt=0, le=60)
    client_id: str = Field(default="tidings", min_length=1, max_length=100)
