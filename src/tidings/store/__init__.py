"""The store: tables, engine set-up, migrations and every SQL statement tidings runs."""
