from payments.gateway import Gateway


class OK:
    def post(self, path, body):
        return {"status": "ok", "id": "ch_1"}


def test_charge():
    assert Gateway(OK()).charge("cus_1", 500) == "ch_1"
