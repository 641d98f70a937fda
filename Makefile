.PHONY: install serve test test-fast lint bench bench-rate bench-campaign bench-kafka bench-kafka-backlog bench-crash bench-engagement format faults

install:  ## create .venv with tidings (and its development tools) installed in it
	scripts/venv.sh

serve:  ## run tidings on the embedded default (SQLite, API + dispatcher in one process)
	scripts/venv.sh
	.venv/bin/tidings serve

test:  ## the whole test suite (installs, starts PostgreSQL/Redis when needed)
	scripts/test.sh

test-fast:  ## tests/unit and tests/integration on SQLite only (no lint, no PostgreSQL, no processes); a few minutes
	scripts/venv.sh
	scripts/services.sh
	PYTHONDONTWRITEBYTECODE= .venv/bin/pytest -n "$${TIDINGS_TEST_WORKERS:-2}" --dist worksteal --sqlite-only tests/unit tests/integration

lint:
	scripts/venv.sh
	.venv/bin/ruff check src tests bench
	.venv/bin/ruff format --check src tests bench
	.venv/bin/mypy

format:
	.venv/bin/ruff check --fix src tests bench
	.venv/bin/ruff format src tests bench

bench:  ## benchmarks on PostgreSQL; writes docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench
	.venv/bin/python -m bench.rate
	.venv/bin/python -m bench.campaign
	.venv/bin/python -m bench.kafka
	.venv/bin/python -m bench.engagement

bench-rate:  ## the rate-limit run alone (30 s); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.rate

bench-campaign:  ## campaign expansion (1,000,000 users) and HIGH latency during a drain (several minutes); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.campaign

bench-kafka:  ## Kafka transport against direct mode: HIGH latency during a drain, relay rate, dispatch scaling (several minutes); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.kafka

bench-kafka-backlog:  ## a 20,000-row LOW backlog at a 30/s share through the Kafka transport with the default 300 s queue lease (about 12 minutes); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.kafka_backlog

bench-crash:  ## sends repeated per SIGKILL of tidings serve, email and SMS, 10 kills per row (several minutes); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.crash_repeats

bench-engagement:  ## the open pixel and click redirect against /healthz (a minute); writes its section of docs/benchmarks.md
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m bench.engagement

faults:  ## the fault harness at length: the trial's sequence and 10 random schedules of SIGKILLs, broker, Redis and PostgreSQL faults (Kafka and direct mode), 10,000 notifications each (about an hour); prints what each left
	scripts/venv.sh
	scripts/services.sh
	.venv/bin/python -m tests.system.run --schedules 10
