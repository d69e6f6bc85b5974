"""The Scrapy project settings that scrapy.cfg names."""

BOT_NAME = "scrapy-neardup"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

# The near-duplicate filter, its index and polite crawling defaults, in one line.
ADDONS = {"crawler.addon.NearDupAddon": 0}

# Where the contact URL in the User-Agent points; set it to your own page.
NEARDUP_CONTACT_URL = "https://github.com/scrapy-neardup/scrapy-neardup"

FEED_EXPORT_ENCODING = "utf-8"
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
