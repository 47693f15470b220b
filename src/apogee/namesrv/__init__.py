"""The NameServer: route tables (pure), its request processor and the server lifecycle."""
