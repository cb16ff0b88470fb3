"""Sources of raw web data: Common Crawl's WARC listings, read in place or downloaded."""
