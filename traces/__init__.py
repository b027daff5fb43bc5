"""kraft_tck.traces"""
