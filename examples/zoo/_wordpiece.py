"""The zoo's Rust WordPiece tokenizer (HF `tokenizers`), trained from in-memory words (nothing downloaded).
Import after setting TOKENIZERS_PARALLELISM / RAYON_NUM_THREADS: the Rust thread pool reads them."""
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

WORDS = [f"w{i % 997}x{(i * 7) % 131}" for i in range(20000)]


def train(special_tokens=("[UNK]",)) -> Tokenizer:
    """A 2,000-token WordPiece over WORDS, ``[UNK]`` for unknown pieces."""
    corpus = [" ".join(WORDS[i:i + 40]) for i in range(0, len(WORDS), 40)]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=2000, special_tokens=list(special_tokens)))
    return tok
