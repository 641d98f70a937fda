"""The preference center's page (docs/inbox.md, The preference center): its words in each
language, the form it posts, and its rendering."""
