"""textstats: word counts, sentence splitting and readability scores."""

from textstats.counts import average_word_length, top_words, word_count, word_frequencies
from textstats.readability import count_syllables, flesch_reading_ease, reading_time_minutes
from textstats.tokenize import sentences, words

__all__ = [
    "average_word_length",
    "count_syllables",
    "flesch_reading_ease",
    "reading_time_minutes",
    "sentences",
    "top_words",
    "word_count",
    "word_frequencies",
    "words",
]
__version__ = "1.2.0"
