"""Content: versioned templates per (type, channel, locale), rendered in a sandbox."""
