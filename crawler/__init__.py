"""scrapy-neardup's Scrapy side: spiders, the filter middleware, the index pipeline, the add-on."""
