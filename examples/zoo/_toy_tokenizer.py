"""A deliberately slow pure-Python tokenizer shared by the tokenization entries of the zoo."""
import re

TEXT = ("the quick brown fox jumps over the lazy dog while the profiler watches every token " * 1200)


def tokenize(text: str) -> list[int]:
    ids = []
    for word in re.findall(r"\w+|\S", text):
        pieces = list(word)
        while len(pieces) > 1:          # greedy pair merging, deliberately slow
            pieces = [pieces[0] + pieces[1]] + pieces[2:]
        ids.append(hash(pieces[0]) % 50_000)
    return ids
