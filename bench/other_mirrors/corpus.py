"""English technical prose harvested from the CPython stdlib's docstrings (deterministic)."""
import ast, os, re, sys, sysconfig

def paragraphs():
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "idlelib", "site-packages", "lib2to3", "__pycache__", "turtledemo"))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            try:
                tree = ast.parse(open(os.path.join(dirpath, f), encoding="utf-8").read())
            except Exception:
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    d = ast.get_docstring(node)
                    if not d:
                        continue
                    for para in re.split(r"\n\s*\n", d):
                        t = " ".join(para.split())
                        if len(t) > 120 and not t.startswith((">>>", "..")) and t.count(" ") > 15:
                            out.append(t)
    # dedupe, keep order
    seen = set(); res = []
    for p in out:
        if p not in seen:
            seen.add(p); res.append(p)
    return res

if __name__ == "__main__":
    ps = paragraphs()
    print(len(ps), sum(len(p) for p in ps))
