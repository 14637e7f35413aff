"""Control flow with BRANCH: pieces compiled by the compile function passed in, then linked."""
