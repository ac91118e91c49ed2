"""Blind human rating of stories in the browser, stored in SQLite, feeding the alignment study.

`store` (schema, transactions), `study` (stories, raters, orders), `server` and `page` (the
rating app), `export` and `agreement` (consensus, labels, Krippendorff's alpha, Table 4), `cli`
(`review-lab rate serve|export`). docs/rating.md says how a study is run.
"""
