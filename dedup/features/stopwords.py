"""Function words that carry no topic, damped in fingerprint features.

Without this, simhash over word counts is dominated by "the", "of", "的" and
friends, and unrelated pages of one site land within 3 bits of each other.
Short, hand-made lists of the most frequent function words of common
languages; case-folded, matched after ``tokens.normalize``.
"""

from __future__ import annotations

_EN = """a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves may might must shall
s t d ll m re ve don doesn didn isn aren wasn weren won wouldn can't it's i'm one two new use
used using see"""
_FR = "le la les un une des du de et est en que qui dans pour pas sur au aux il elle ils elles ce ces son sa ses par avec plus ne se ou mais nous vous leur"
_DE = "der die das und ist in zu den dem des ein eine einer eines nicht mit sich auf für von im es als auch an er sie wir ihr so wie bei aus oder nach"
_ES = "el la los las un una unos unas y de del en que es por para con no se su sus al lo como más pero o este esta"
_PT = "o a os as um uma e de do da dos das em no na que é por para com não se seu sua ao mais mas ou"
_IT = "il lo la i gli le un una e di del della in che è per con non si al da come più ma o"
_NL = "de het een en van in is dat op te zijn met voor niet aan er om ook als bij"
_RU = "и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по от из о это"
_ZH = """的 了 是 在 和 与 及 或 也 都 就 而 并 这 那 之 其 有 为 对 中 上 下 我 你 他 她 它 我们 他们
你们 一个 不 没有 被 把 让 从 到 以 于 等 着 过 呢 吗 吧 啊 所 但 又 还 很 将 要 会 能 可以 这个 那个
这些 那些 自己 什么 如果 因为 所以 但是 而且"""

STOPWORDS: frozenset[str] = frozenset(
    w for lst in (_EN, _FR, _DE, _ES, _PT, _IT, _NL, _RU, _ZH) for w in lst.split()
)
