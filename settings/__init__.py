"""The repository's own Scrapy project settings (for the tests; not installed)."""

BOT_NAME = "scrapy-neardup"
SPIDER_MODULES = ["scrapy_neardup.crawler.spiders"]
NEWSPIDER_MODULE = "scrapy_neardup.crawler.spiders"

# The near-duplicate filter, and the polite crawl profile.
ADDONS = {"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.PoliteCrawlAddon": 0}

FEED_EXPORT_ENCODING = "utf-8"
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
