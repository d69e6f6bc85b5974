"""The repository's own Scrapy project settings (for the tests; not installed)."""

BOT_NAME = "scrapy-neardup"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

# The near-duplicate filter, and the polite crawl profile.
ADDONS = {"crawler.addon.NearDupAddon": 0, "crawler.addon.PoliteCrawlAddon": 0}

FEED_EXPORT_ENCODING = "utf-8"
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
