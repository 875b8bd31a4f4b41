"""Protocol v4: the Redis contract shared by every rota process and by other languages
(see docs/protocol.md)."""
