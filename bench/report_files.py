"""The files a bench report writes: OUT_DIR/NAME.md and the gnuplot script TMP/NAME.gp, which draws
OUT_DIR/NAME.png (plain text labels: model names carry underscores)."""


def write_report(out_dir, tmp, name, md_lines, title, xlabel, key, plots, width=800):
    with open("%s/%s.md" % (out_dir, name), "w", encoding="utf-8") as f:
        f.write("\n".join(md_lines))
    with open("%s/%s.gp" % (tmp, name), "w", encoding="utf-8") as f:
        f.write('set terminal pngcairo size %d,450 noenhanced\nset output "%s/%s.png"\nset title "%s"\n'
                'set xlabel "%s"\nset ylabel "t/s"\nset key %s\nplot %s\n'
                % (width, out_dir, name, title, xlabel, key, ", ".join(plots)))
