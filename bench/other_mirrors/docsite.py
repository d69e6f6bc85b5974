#!/usr/bin/env python3
"""A documentation-site generator written apart from the project's fixtures (by a helper trying the
package as a user, to check the URL rules on sites it did not design), for
``bench/url_rules_bench.py --sites other-...``.

Builds a Sphinx-like (foo.html, relative links, sidebar + breadcrumbs + footer) or MkDocs-like
(foo/ directory URLs, full nav tree, header) documentation tree, either
  mode=lang:    one folder per language; untranslated pages are the English file, stored as
                symlinks / copies (own mtime per language folder) / absent (nginx try_files fallback);
  mode=version: /v1/ /v2/ /v3/ and /latest/ (a symlink to v3); unchanged pages are byte-identical
                files written at each version's build time.
Writes DIR/www (the document root) and DIR/manifest.json (what each URL is).
"""
import argparse, hashlib, html, json, os, random, re, shutil, sys
sys.path.insert(0, os.path.dirname(__file__))
from corpus import paragraphs

CORPUS = [p.encode("ascii", "xmlcharrefreplace").decode() for p in paragraphs()]

LANG_SYLL = {
    "de": "ge ung sch ein ver ich der die keit lich ber ä ö ü ß an au zu st en ter".split(),
    "fr": "le de eau ion ment ré é è que ou ai tion ç par con es ur eu".split(),
    "es": "el la ción ar os ñ es do ra ue ie mi ta lo ble".split(),
    "it": "zione re gli che lo tt o i a mente ia ri no per".split(),
    "pt": "ção ões lh nh ão do ar em ma te pa co".split(),
    "nl": "ij oe aa ee sch lijk heid ge en van ver uit".split(),
    "pl": "prz szcz ł ś ą ę nie ow cz rz ka wy do".split(),
    "ru": "ко на по ст ра ени ов ть ли мы де жа ще ю".split(),
    "uk": "ці ні ва ти ї є ко ро зу ли ст".split(),
    "ja": "の に は を た が で て と し れ さ ある いる する コ ン ピ ュ ー タ 設 定 実 行 関 数".split(),
    "zh": list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处府队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"),
    "ko": list("가나다라마바사아자차카타파하고노도로모보소오조초코토포호구누두루무부수우주추쿠투푸후기니디리미비시이지치키티피히한국어설정실행함수문서"),
}
LANG_NAMES = {"en": "English", "de": "Deutsch", "fr": "Français", "es": "Español", "it": "Italiano",
              "pt": "Português", "nl": "Nederlands", "pl": "Polski", "ru": "Русский", "uk": "Українська",
              "ja": "日本語", "zh": "简体中文", "ko": "한국어"}
CJK = {"ja", "zh", "ko"}


LANG_CV = {
    "de": ("b d f g h k l m n r s t w z sch ch st pf kr gr".split(), "a e i o u ä ö ü ei au ie e e".split(), ["", "n", "r", "t", "ng", "s", "ch", "lich", "ung", "keit"]),
    "fr": ("b c d f g j l m n p r s t v qu ch gr pl tr".split(), "a e i o u é è ai au eau ou oi ie".split(), ["", "", "s", "t", "r", "x", "nt", "tion", "ment", "eux"]),
    "es": ("b c d f g j l m n p r s t v ll ñ ch br tr".split(), "a e i o u ue ie ia io á é ó".split(), ["", "", "s", "n", "r", "l", "ción", "dad", "mente"]),
    "it": ("b c d f g l m n p r s t v z gl gn sc ch tt".split(), "a e i o u ia io ie uo".split(), ["", "", "", "n", "r", "zione", "mente", "ità"]),
    "pt": ("b c d f g j l m n p r s t v lh nh ch br".split(), "a e i o u ã õ é ê ó ai ei ou".split(), ["", "", "s", "r", "m", "ção", "ões", "mente"]),
    "nl": ("b d f g h j k l m n p r s t v w z sch".split(), "a e i o u aa ee oo uu ij oe ui ei".split(), ["", "n", "r", "t", "k", "lijk", "heid", "en"]),
    "pl": ("b c d f g h j k l ł m n p r s t w z cz sz rz ś ż dz".split(), "a e i o u y ą ę ó ie".split(), ["", "", "ć", "ń", "k", "ł", "ski", "owy", "nie"]),
    "ru": ("б в г д ж з к л м н п р с т ф х ц ч ш щ".split(), "а е и о у ы э ю я ё".split(), ["", "", "й", "н", "т", "ть", "ние", "ский", "ость"]),
    "uk": ("б в г ґ д ж з к л м н п р с т ф х ц ч ш".split(), "а е и і ї о у ю я є".split(), ["", "", "й", "н", "ть", "ння", "ський"]),
}
HAN = LANG_SYLL_HAN = None


def tr_word(lang, w):
    if not re.search(r"[A-Za-z]", w):
        return w
    h = hashlib.sha256(f"{lang}:{w.lower()}".encode()).digest()
    if lang == "ko":
        n = 1 + len(w) // 3
        return "".join(chr(0xAC00 + (h[2 * i] * 256 + h[2 * i + 1]) % 11172) for i in range(min(n, 5)))
    if lang in ("zh", "ja"):
        han = LANG_SYLL["zh"]
        n = 1 + len(w) // 4
        s = "".join(han[(h[2 * i] * 256 + h[2 * i + 1]) % len(han)] for i in range(min(n, 4)))
        if lang == "ja":
            kana = "のにはをたがでてとしれさるいすかくけこまみむめもらりろわん"
            s += kana[h[20] % len(kana)] + (kana[h[21] % len(kana)] if h[22] % 2 else "")
        return s
    C, V, E = LANG_CV[lang]
    n = 1 + min(3, len(w) // 3)
    out = "".join(C[h[2 * i] % len(C)] + V[h[2 * i + 1] % len(V)] for i in range(n)) + E[h[30] % len(E)]
    return out.capitalize() if w[:1].isupper() else out


def translate(lang, text):
    words = re.findall(r"&#\d+;|[A-Za-z0-9_']+|[^A-Za-z0-9_'\s]+", text)
    out = [tr_word(lang, w) for w in words]
    sep = "" if lang in {"ja", "zh"} else " "
    return sep.join(out)


CHROME = ["Navigation", "index", "modules", "next", "previous", "Table of Contents", "Quick search", "Go",
          "This Page", "Show Source", "Copyright", "Created using", "documentation", "Languages",
          "Search", "Home", "Edit this page", "Previous topic", "Next topic", "On this page", "Versions"]


def chrome(lang):
    if lang == "en":
        return {c: c for c in CHROME}
    return {c: translate(lang, c) for c in CHROME}


def build_tree(rng, n_extra):
    """Page list: (path_without_ext, title, section). Paths like 'guide/advanced/tls'."""
    pages = [("index", "Frobnicator documentation", "")]
    for p in ["install", "quickstart", "faq", "glossary", "changelog", "license", "search", "genindex"]:
        pages.append((p, p.capitalize(), ""))
    topics = ["configuration", "logging", "plugins", "caching", "scheduling", "security", "testing",
              "deployment", "migration", "performance", "internationalization", "storage", "networking",
              "templates", "signals", "middleware", "serialization", "authentication", "permissions",
              "pagination", "validation", "uploads", "streaming", "webhooks", "metrics", "tracing"]
    rng.shuffle(topics)
    secs = {
        "tutorial": [f"part-{i:02d}" for i in range(1, 11)],
        "guide": topics[:16],
        "guide/advanced": topics[16:24],
        "howto": [f"recipe-{w}" for w in topics[:14]],
        "api": [],
    }
    for sec, items in secs.items():
        pages.append((f"{sec}/index", sec.split("/")[-1].capitalize(), sec))
        for it in items:
            pages.append((f"{sec}/{it}", it.replace("-", " ").capitalize(), sec))
    for mod in ["core", "io", "net", "cli", "util", "ext"][:3 + n_extra]:
        pages.append((f"api/{mod}/index", f"frob.{mod}", f"api/{mod}"))
        for cls in ["Client", "Server", "Session", "Config", "Reader", "Writer", "Pool", "Cache"][:rng.randint(4, 8)]:
            pages.append((f"api/{mod}/{cls.lower()}", f"frob.{mod}.{cls}", f"api/{mod}"))
    return pages


class Builder:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.pages = build_tree(self.rng, a.api_extra)
        self.paths = [p for p, _, _ in self.pages]
        self.sections = sorted({s for _, _, s in self.pages if s})
        # content: each page gets its own paragraphs and code blocks
        corpus = CORPUS[:]
        random.Random(a.seed * 7 + 1).shuffle(corpus)
        self.pool = corpus
        self.pi = 0
        self.content = {}
        for p, title, sec in self.pages:
            if p in ("search", "genindex"):
                self.content[p] = {"title": title, "blocks": []}
                continue
            n = self.rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 14])
            blocks = []
            for i in range(n):
                blocks.append(("p", self.take()))
                if self.rng.random() < 0.3:
                    blocks.append(("code", self.code()))
                if self.rng.random() < 0.15:
                    blocks.append(("h2", self.take()[:40].rsplit(" ", 1)[0]))
            self.content[p] = {"title": title, "blocks": blocks}

    def take(self):
        t = self.pool[self.pi % len(self.pool)]
        self.pi += 1
        return t

    def code(self):
        r = self.rng
        fn = r.choice(["connect", "load", "dump", "render", "run", "open_session", "configure"])
        lines = [f">>> import frob", f">>> c = frob.{fn}({r.randint(1, 999)}, timeout={r.randint(1, 60)})",
                 f">>> c.{r.choice(['send', 'read', 'close', 'flush'])}(b'{r.getrandbits(32):08x}')"]
        return "\n".join(lines)

    # ---------- URLs ----------
    def url_of(self, path):  # site-relative URL path within a language/version folder
        if self.a.layout == "sphinx":
            return path + ".html"
        if path == "index":
            return ""
        if path.endswith("/index"):
            return path[:-5]
        return path + "/"

    def file_of(self, path):
        if self.a.layout == "sphinx":
            return path + ".html"
        u = self.url_of(path)
        return u + "index.html"

    def rel(self, frm, to):
        fu, tu = self.url_of(frm), self.url_of(to)
        fdir = fu.rsplit("/", 1)[0] if "/" in fu else ""
        fparts = [x for x in fdir.split("/") if x]
        up = "../" * len(fparts)
        if self.a.layout == "sphinx":
            return up + tu
        return (up + tu) or "./"

    # ---------- rendering ----------
    def render(self, folder, path, lang, blocks_override=None, title_override=None, ch=None, version=None,
               folders=None, pageset=None):
        a = self.a
        ch = ch or chrome(lang)
        c = self.content[path]
        title = title_override or c["title"]
        blocks = blocks_override if blocks_override is not None else c["blocks"]
        pageset = pageset or self.paths
        e = html.escape
        out = []
        out.append(f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
                   f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                   f'<title>{e(title)} &#8212; Frobnicator {e(ch["documentation"])}</title>\n')
        depth = self.url_of(path).count("/")
        up = "../" * depth
        out.append(f'<link rel="stylesheet" href="{up}_static/theme.css">\n<script src="{up}_static/doctools.js"></script>\n')
        if folders:
            for f in folders:
                out.append(f'<link rel="alternate" hreflang="{f}" href="/{f}/{self.url_of(path)}">\n')
        out.append('</head>\n<body>\n')
        switch = ""
        if folders and a.switcher != "none":
            items = "".join(f'<li><a href="/{f}/{self.url_of(path)}">{LANG_NAMES.get(f, f)}</a></li>'
                            for f in folders if (pageset is None or path in pageset))
            switch = f'<div class="switcher"><span>{e(ch["Versions" if a.mode == "version" else "Languages"])}</span><ul>{items}</ul></div>\n'
        if a.switcher == "header":
            out.append(f'<header class="md-header"><a href="{self.rel(path, "index")}">Frobnicator</a>\n{switch}</header>\n')
        # breadcrumbs / related bar
        crumbs = [f'<a href="{self.rel(path, "index")}">{e(ch["Home"])}</a>']
        if "/" in path:
            parts = path.split("/")[:-1]
            for i in range(len(parts)):
                ip = "/".join(parts[:i + 1]) + "/index"
                if ip in self.content:
                    crumbs.append(f'<a href="{self.rel(path, ip)}">{e(self.content[ip]["title"])}</a>')
        i = self.paths.index(path)
        prv = self.paths[i - 1] if i > 0 else None
        nxt = self.paths[i + 1] if i + 1 < len(self.paths) else None
        rel_bar = [f'<a href="{self.rel(path, "genindex")}">{e(ch["index"])}</a>']
        if nxt and nxt in pageset:
            rel_bar.append(f'<a href="{self.rel(path, nxt)}" rel="next">{e(ch["next"])}</a>')
        if prv and prv in pageset:
            rel_bar.append(f'<a href="{self.rel(path, prv)}" rel="prev">{e(ch["previous"])}</a>')
        out.append(f'<div class="related" role="navigation"><h3>{e(ch["Navigation"])}</h3><ul>'
                   + "".join(f"<li>{x}</li>" for x in rel_bar) + '</ul>\n<nav class="breadcrumbs">'
                   + " &#187; ".join(crumbs) + "</nav></div>\n")
        # sidebar
        if a.layout == "sphinx":
            sec = self.content[path]
            local = [p for p, _, s in self.pages if s and s == (path.rsplit("/", 1)[0] if "/" in path else "") and p in pageset]
            tops = [p for p, _, s in self.pages if (p.endswith("/index") and p.count("/") == 1) or (not s and p != "index")]
            nav = "".join(f'<li class="toctree-l1"><a href="{self.rel(path, p)}">{e(self.content[p]["title"])}</a></li>' for p in tops if p in pageset)
            nav += "".join(f'<li class="toctree-l2"><a href="{self.rel(path, p)}">{e(self.content[p]["title"])}</a></li>' for p in local)
            out.append(f'<div class="sphinxsidebar" role="navigation"><h3><a href="{self.rel(path, "index")}">{e(ch["Table of Contents"])}</a></h3><ul>{nav}</ul>\n'
                       f'<div role="search"><h3>{e(ch["Quick search"])}</h3><form action="{self.rel(path, "search")}" method="get"><input type="text" name="q"><input type="submit" value="{e(ch["Go"])}"></form></div></div>\n')
        else:
            nav = "".join(f'<li class="md-nav__item"><a class="md-nav__link" href="{self.rel(path, p)}">{e(self.content[p]["title"])}</a></li>' for p in self.paths if p in pageset)
            out.append(f'<nav class="md-nav md-nav--primary" aria-label="{e(ch["Navigation"])}"><ul class="md-nav__list">{nav}</ul></nav>\n')
        # body
        out.append(f'<div class="document"><div class="body" role="main">\n<h1>{e(title)}</h1>\n')
        for kind, txt in blocks:
            if kind == "p":
                out.append(f"<p>{txt}</p>\n")
            elif kind == "h2":
                out.append(f"<h2>{txt}</h2>\n")
            elif kind == "code":
                out.append(f'<div class="highlight"><pre>{e(txt)}</pre></div>\n')
            elif kind == "raw":
                out.append(txt)
        if path == "genindex":
            out.append("<ul>" + "".join(f'<li><a href="{self.rel(path, p)}">{e(self.content[p]["title"])}</a></li>' for p in self.paths if p.startswith("api/") and p in pageset) + "</ul>\n")
        if path == "search":
            out.append(f'<p>{e(ch["Search"])}</p><form action="" method="get"><input type="text" name="q"></form>\n')
        out.append("</div></div>\n")
        # footer
        src = f' | <a href="{up}_sources/{self.file_of(path)}.txt" rel="nofollow">{e(ch["Show Source"])}</a>' if a.sources else ""
        out.append(f'<footer class="footer">&#169; {e(ch["Copyright"])} 2019-2024, Frobnicator team. {e(ch["Created using"])} Sphinx 7.2.6.{src}</footer>\n')
        if a.switcher == "footer":
            out.append(switch)
        out.append("</body>\n</html>\n")
        return "".join(out)

    def source_txt(self, path, blocks, title):
        return title + "\n" + "=" * len(title) + "\n\n" + "\n\n".join(t for k, t in blocks if k in ("p", "h2")) + "\n"


def same_len_replace(text, rng, target_len):
    """Other ASCII prose of exactly target_len bytes."""
    words = []
    while len(" ".join(words)) < target_len + 20:
        words += rng.choice(CORPUS).split()
    s = " ".join(words)[:target_len]
    if s.endswith(" "):
        s = s[:-1] + "x"
    assert len(s.encode()) == target_len
    return s


def write(path, data, mtime=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.remove(path)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    if mtime:
        os.utime(path, (mtime, mtime))


def fit_to_len(render, blocks, target):
    """Trim the translated blocks / pad a comment so the page is exactly target bytes."""
    blocks = [list(b) for b in blocks]
    for _ in range(10000):
        page = render([tuple(b) for b in blocks] + [("raw", "<!--PAD-->")])
        n = len(page.encode())
        diff = target - (n - len("<!--PAD-->"))
        if diff >= 8:
            pad = "<!--" + " " * (diff - 7) + "-->"
            out = page.replace("<!--PAD-->", pad)
            assert len(out.encode()) == target, (len(out.encode()), target)
            return out
        excess = 8 - diff
        ps = [b for b in blocks if b[0] in ("p", "code", "h2")]
        if not ps:
            raise RuntimeError("cannot fit")
        last = ps[-1]
        if len(last[1].encode()) <= excess + 10:
            blocks.remove(last)
        else:
            last[1] = last[1][: max(1, len(last[1]) - max(1, excess // 3))]
    raise RuntimeError("no fit")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--layout", choices=["sphinx", "mkdocs"], default="sphinx")
    ap.add_argument("--mode", choices=["lang", "version"], default="lang")
    ap.add_argument("--store", choices=["symlink", "copy", "fallback"], default="symlink")
    ap.add_argument("--langs", default="en,de,fr,es,it,pt,pl,ru,ja,zh")
    ap.add_argument("--tr-min", type=float, default=0.05)
    ap.add_argument("--tr-max", type=float, default=0.20)
    ap.add_argument("--front-untranslated", default="", help="languages whose front page is NOT translated")
    ap.add_argument("--cluster", default="", help="lang:section whose whole section is translated")
    ap.add_argument("--switcher", choices=["header", "footer", "none"], default="footer")
    ap.add_argument("--sources", action="store_true")
    ap.add_argument("--traps", default="full,full,head,tail,mid,tail,head,full")
    ap.add_argument("--api-extra", type=int, default=3)
    ap.add_argument("--latest", choices=["symlink", "copy"], default="symlink")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--v2-change", type=float, default=0.12)
    ap.add_argument("--v1-change", type=float, default=0.25)
    a = ap.parse_args()
    B = Builder(a)
    rng = random.Random(a.seed * 13 + 5)
    www = os.path.join(a.out, "www")
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(www)
    man = {"args": vars(a), "urls": {}}
    T0 = 1700000000
    if a.mode == "lang":
        langs = a.langs.split(",")
        assert langs[0] == "en"
        mt = {l: T0 + 86400 * (i * 3 + 1) + 3600 * i for i, l in enumerate(langs)}
        en_files = {}
        for p in B.paths:
            page = B.render("en", p, "en", folders=langs)
            f = os.path.join(www, "en", B.file_of(p))
            write(f, page, mt["en"])
            en_files[p] = page.encode()
            man["urls"][f"/en/{B.url_of(p)}"] = {"kind": "original", "path": p}
            if a.sources:
                c = B.content[p]
                write(os.path.join(www, "en", "_sources", B.file_of(p) + ".txt"), B.source_txt(p, c["blocks"], c["title"]), mt["en"])
        traps = a.traps.split(",") if a.traps else []
        front_un = set(filter(None, a.front_untranslated.split(",")))
        clusters = {}
        for cl in filter(None, a.cluster.split(",")):
            l, s = cl.split(":")
            clusters.setdefault(l, []).append(s)
        trap_plan = []  # (lang, path, kind)
        others = langs[1:]
        cand = [p for p in B.paths if p not in ("index", "search", "genindex") and len(B.content[p]["blocks"]) >= 3]
        used = set()
        for i, k in enumerate(traps):
            p = rng.choice([c for c in cand if c not in used]); used.add(p)
            trap_plan.append((others[(i * 2 + 1) % len(others)], p, k))
        for l in others:
            frac = rng.uniform(a.tr_min, a.tr_max)
            ch = chrome(l)
            n_tr = max(1, round(frac * len(B.paths)))
            tr = set()
            if l not in front_un:
                tr.add("index")
            for s in clusters.get(l, []):
                tr |= {p for p in B.paths if p.startswith(s + "/")}
            pool = [p for p in B.paths if p not in tr and p not in ("search", "genindex")]
            rng.shuffle(pool)
            while len(tr) < n_tr and pool:
                tr.add(pool.pop())
            my_traps = {p: k for (tl, p, k) in trap_plan if tl == l and p not in tr}
            man.setdefault("lang_stats", {})[l] = {"translated": len(tr), "pages": len(B.paths), "frac": round(len(tr) / len(B.paths), 3), "traps": my_traps}
            for p in B.paths:
                f = os.path.join(www, l, B.file_of(p))
                url = f"/{l}/{B.url_of(p)}"
                c = B.content[p]
                if p in tr:
                    partial = rng.random() < 0.3 and p != "index"
                    pf = rng.uniform(0.3, 0.7)
                    blocks = [(k, translate(l, t)) if (k in ("p", "h2") and (not partial or rng.random() < pf)) else (k, t) for k, t in c["blocks"]]
                    page = B.render(l, p, l, blocks_override=blocks, title_override=translate(l, c["title"]), ch=ch, folders=langs)
                    write(f, page, mt[l])
                    man["urls"][url] = {"kind": "partial" if partial else "translated", "path": p}
                    if a.sources:
                        write(os.path.join(www, l, "_sources", B.file_of(p) + ".txt"), B.source_txt(p, blocks, c["title"]), mt[l])
                elif p in my_traps:
                    k = my_traps[p]
                    enb = en_files[p]
                    target = len(enb)
                    if k == "full":
                        blocks = [(kk, translate(l, t)) if kk in ("p", "h2") else (kk, t) for kk, t in c["blocks"]]
                        page = fit_to_len(lambda bl: B.render(l, p, l, blocks_override=bl, title_override=translate(l, c["title"]), ch=ch, folders=langs), blocks, target)
                    else:
                        ps = [i for i, (kk, t) in enumerate(c["blocks"]) if kk == "p"]
                        blocks = list(c["blocks"])
                        if k == "head":
                            idx = [ps[0]]
                        elif k == "tail":
                            idx = ps[-max(1, len(ps) // 4):]
                        else:  # mid
                            idx = [ps[len(ps) // 2]]
                        for i in idx:
                            blocks[i] = ("p", same_len_replace(blocks[i][1], rng, len(blocks[i][1].encode())))
                        page = B.render("en", p, "en", blocks_override=blocks, folders=langs)
                    assert len(page.encode()) == target, (k, len(page.encode()), target)
                    assert page.encode() != enb
                    write(f, page, mt[l] if a.store == "copy" else mt["en"])
                    man["urls"][url] = {"kind": "trap-" + k, "path": p}
                    if a.sources:
                        os.makedirs(os.path.dirname(os.path.join(www, l, "_sources", B.file_of(p) + ".txt")), exist_ok=True)
                        os.symlink(os.path.relpath(os.path.join(www, "en", "_sources", B.file_of(p) + ".txt"), os.path.dirname(os.path.join(www, l, "_sources", B.file_of(p) + ".txt"))), os.path.join(www, l, "_sources", B.file_of(p) + ".txt"))
                else:
                    man["urls"][url] = {"kind": "copy", "path": p}
                    srcs = [(os.path.join(www, "en", B.file_of(p)), f)]
                    if a.sources:
                        srcs.append((os.path.join(www, "en", "_sources", B.file_of(p) + ".txt"), os.path.join(www, l, "_sources", B.file_of(p) + ".txt")))
                    for src, dst in srcs:
                        if a.store == "symlink":
                            os.makedirs(os.path.dirname(dst), exist_ok=True)
                            os.symlink(os.path.relpath(src, os.path.dirname(dst)), dst)
                        elif a.store == "copy":
                            os.makedirs(os.path.dirname(dst), exist_ok=True)
                            shutil.copyfile(src, dst)
                            os.utime(dst, (mt[l], mt[l]))
                        # fallback: nothing written
        # root language chooser
        write(os.path.join(www, "index.html"), "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Frobnicator</title></head><body><ul>"
              + "".join(f'<li><a href="/{l}/{B.url_of("index")}">{LANG_NAMES[l]}</a></li>' for l in langs) + "</ul></body></html>", T0)
    else:
        vers = ["v1", "v2", "v3"]
        folders = vers + ["latest"]
        mt = {"v1": T0, "v2": T0 + 90 * 86400, "v3": T0 + 200 * 86400}
        all_p = B.paths
        removed_v1 = set(rng.sample([p for p in all_p if p.startswith(("guide/", "howto/", "api/")) and not p.endswith("/index")], 10))
        # content per version: v3 = base; v2 differs from v3 on ~12% pages; v1 differs from v2 on ~25%
        content = {"v3": {p: B.content[p] for p in all_p}}
        kinds = {}
        def mutate(c, how):
            bl = list(c["blocks"])
            ps = [i for i, (k, t) in enumerate(bl) if k == "p"]
            if not ps:
                return c, "same"
            if how == "big":
                for i in rng.sample(ps, max(1, len(ps) // 2)):
                    bl[i] = ("p", B.take())
                bl.append(("p", B.take()))
            elif how == "small":
                i = rng.choice(ps)
                t = bl[i][1]
                bl[i] = ("p", t[: len(t) // 2] + " This behaviour changed in this release. " + t[len(t) // 2:])
            elif how == "trap":  # same byte length, one paragraph rewritten in place
                i = ps[len(ps) // 2] if rng.random() < 0.5 else ps[-1]
                bl[i] = ("p", same_len_replace(bl[i][1], rng, len(bl[i][1].encode())))
            return {"title": c["title"], "blocks": bl}, how
        prev = "v3"
        for v, share in (("v2", a.v2_change), ("v1", a.v1_change)):
            content[v] = {}
            for p in all_p:
                c = content[prev][p]
                if p in ("index", "search", "genindex"):
                    content[v][p] = c; kinds[(v, p)] = "same"; continue
                if p == "changelog":
                    content[v][p], kinds[(v, p)] = mutate(c, "big"); continue
                r = rng.random()
                if r < share * 0.6:
                    content[v][p], kinds[(v, p)] = mutate(c, "big")
                elif r < share * 0.85:
                    content[v][p], kinds[(v, p)] = mutate(c, "small")
                elif r < share:
                    content[v][p], kinds[(v, p)] = mutate(c, "trap")
                else:
                    content[v][p] = c; kinds[(v, p)] = "same"
            prev = v
        vnum = {"v1": "1.4", "v2": "2.9", "v3": "3.2"}
        for v in vers:
            pageset = [p for p in all_p if not (v == "v1" and p in removed_v1)]
            for p in pageset:
                c = content[v][p]
                blocks = c["blocks"]
                if p == "index":
                    blocks = [("p", f"Welcome to Frobnicator {vnum[v]}. This is the documentation of release {vnum[v]}.")] + list(blocks)
                B.content[p] = c  # render reads title from B.content
                page = B.render(v, p, "en", blocks_override=blocks, folders=folders, pageset=set(pageset))
                write(os.path.join(www, v, B.file_of(p)), page, mt[v])
                man["urls"][f"/{v}/{B.url_of(p)}"] = {"kind": kinds.get((v, p), "original"), "path": p}
            B.content = dict(content["v3"])
        if a.latest == "symlink":
            os.symlink("v3", os.path.join(www, "latest"))
        else:
            shutil.copytree(os.path.join(www, "v3"), os.path.join(www, "latest"))
        for p in all_p:
            man["urls"][f"/latest/{B.url_of(p)}"] = {"kind": "latest", "path": p}
        write(os.path.join(www, "index.html"), "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Frobnicator</title></head><body><a href='/latest/'>latest</a></body></html>", T0)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, ensure_ascii=False)
    n = len(man["urls"])
    print(f"{a.out}: {n} URLs", json.dumps(man.get("lang_stats", {}), ensure_ascii=False)[:2000])


if __name__ == "__main__":
    main()
