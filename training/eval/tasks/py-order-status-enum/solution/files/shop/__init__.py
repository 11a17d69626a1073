"""Order handling for the web shop: the order lifecycle, storage, reports and the JSON API."""
