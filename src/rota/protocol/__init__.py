"""Protocol v3: the Redis contract shared by every rota process and by other languages."""
