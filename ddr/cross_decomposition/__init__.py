"""Cross decompositions of two views: CCA and PLS-SVD from one pass of joint moments."""
