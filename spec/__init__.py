"""kraft_tck.spec"""
