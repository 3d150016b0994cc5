"""Scrapy settings for the scrapy-redis column of `benches/shared.rs`.

The bench adds per scenario: REDIS_URL, CONCURRENT_REQUESTS,
CONCURRENT_REQUESTS_PER_DOMAIN and DOWNLOAD_DELAY (`-s NAME=VALUE`).
"""

# One crawl shared through Redis: its queue, its seen set and its items.
SCHEDULER = "scrapy_redis.scheduler.Scheduler"
DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"
SCHEDULER_PERSIST = True
ITEM_PIPELINES = {"scrapy_redis.pipelines.RedisPipeline": 300}
# A RedisSpider waits for work forever unless told to stop when idle.
MAX_IDLE_TIME_BEFORE_CLOSE = 2

# As legcrawl's runs: robots.txt obeyed, a fixed delay.
ROBOTSTXT_OBEY = True
RANDOMIZE_DOWNLOAD_DELAY = False

TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "WARNING"
