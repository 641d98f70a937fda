"""Provider callbacks and the signatures that authenticate them."""
