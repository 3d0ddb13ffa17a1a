"""The only code that formats for people: terminal tables, JSON documents."""
