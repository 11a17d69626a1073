"""A small module."""
import functools

MAX_RETRIES = 3
_DEFAULT_TIMEOUT: float = 2.5
logger = None
type Callback = callable


def get_file_name(path: str) -> str:
    def strip(part):
        return part.strip()
    return strip(path)


@functools.cache
async def fetch(url):
    return url


class Client(Base):
    retries = MAX_RETRIES

    def __init__(self, host):
        self.host = host

    @property
    def address(self):
        return self.host

    class Options:
        verbose = False


@dataclass
class Config:
    name: str
