DEFAULTS = {
    "service": {"name": "orders", "region": "eu-central-1"},
    "db": {
        "host": "localhost",
        "port": 5432,
        "name": "orders",
        "timeout": 5.0,
        "pool": {"min": 1, "max": 10},
    },
    "http": {"port": 8080, "workers": 4, "cors_origins": ["https://shop.example.com"]},
    "log": {"level": "info", "json": False},
    "features": ["search", "recommendations"],
}
