"""kraft_tck.conformance"""
