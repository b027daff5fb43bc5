"""kraft_tck.reference"""
