// ATTACK: noncharacters and other code points that do not print, in the compiler's output. The #error
// lines quote the source, which holds noncharacters (U+10FFFF, U+FDD0, U+FFFE, U+1FFFF), format
// characters that hide text (zero-width space U+200B, word joiner U+2060, soft hyphen U+00AD, a
// byte-order mark U+FEFF, the tag characters U+E0041 U+E007F), a private-use code point (U+E000),
// an unassigned one (U+0378) and a no-break space (U+00A0): a terminal, a browser or an XML parser
// shows them as it likes, drops them, or refuses the file. Every report must show them as escapes.
#error "score: 100􏿿/100 ﷐points￾ 🿿"
#error "hidden​word⁠joined soft­hyphen bom﻿ tag󠁁󠁿 private unassigned͸ nbsp "
