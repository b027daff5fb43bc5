"""kraft_tck.tla"""
