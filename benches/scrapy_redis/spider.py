"""A minimal scrapy-redis spider for `benches/shared.rs` (issue 13).

Reads its seeds from the Redis list `bench:start_urls` (JSON `{"url": ...}`),
follows every `<a href>` on the hosts given by `-a hosts=IP,IP,...` and yields
one item per page (url, status, title). Scheduling, dedup and items go through
scrapy-redis (see `settings.py`); it ends after `MAX_IDLE_TIME_BEFORE_CLOSE`
seconds with nothing to do.
"""

from urllib.parse import urlsplit

import scrapy
from scrapy_redis.spiders import RedisSpider


class BenchSpider(RedisSpider):
    name = "bench"

    def __init__(self, hosts="", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hosts = set(filter(None, hosts.split(",")))

    def parse(self, response):
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if urlsplit(url).hostname in self.hosts:
                yield scrapy.Request(url, callback=self.parse)
