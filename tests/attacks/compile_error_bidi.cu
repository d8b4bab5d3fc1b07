// ATTACK: bidirectional controls in the compiler's output ("Trojan Source", CVE-2021-42574). The #error
// lines quote the source, which holds a right-to-left override (U+202E) and its pop (U+202C), isolates
// (U+2066, U+2067, U+2068 and their pop U+2069), embeddings (U+202A, U+202B), marks (U+200E, U+200F,
// U+061C) and a line separator (U+2028): a terminal, an editor or a browser showing them reorders the text,
// so "0/100 points" can read as a pass. Every report must show them as \uNNNN escapes.
#error "score: ‮001/0‬ points ⁦isolated⁩ ⁧rtl⁩ ⁨first⁩"
#error "‪embedded‬ ‫embedded‬ ‎mark‏ ؜arabic-mark  separator"
