"""The provider simulator: real provider protocols on loopback, for tests, benchmarks and demos."""
