"""The dashboard at /dashboard (api/routes/dashboard.py): its sign-in sessions, the data its
pages show, and their templates (templates/)."""
