#!/usr/bin/env python3
"""Writes presets/arch/stream_t3_<cores>c_<ws>ws.toml: the iso-area systems of Stream's Table 3
(Symons et al., "Stream", Section 6.2): 1, 2, 4 or 8 cores, each weight stationary (WS) or output
stationary (OS), 2^12 PEs (the WS arrays have 72/64 of that: C x FX x FY rows) and 4 MiB of
activation + weight memory in total, a 256-bit core-to-core bus, one 128-bit off-chip port to a
256 MiB DRAM. Run from the repository root: python3 scripts/stream_t3_presets.py"""
import pathlib

# Table 3 per core count: WS (rows, cols, C, K, act MiB, act B/cycle, W MiB, W B/cycle) and
# OS (rows, cols, OX, K, act MiB, act B/cycle, W MiB, W B/cycle). FX = FY = 3 on WS rows.
WS = {1: (72, 64, 8, 64, 2, 72, 2, 128), 2: (36, 64, 4, 64, 1, 36, 1, 128),
      4: (36, 32, 4, 32, 0.5, 36, 0.5, 64), 8: (18, 32, 2, 32, 0.25, 18, 0.25, 64)}
OS = {1: (64, 64, 64, 64, 2, 64, 2, 64), 2: (32, 64, 32, 64, 1, 32, 1, 64),
      4: (32, 32, 32, 32, 0.5, 32, 0.5, 32), 8: (16, 32, 16, 32, 0.25, 16, 0.25, 32)}

# Stream's own 22 nm CACTI figures (stream/inputs/exploration/hardware/memory_pool/
# Stream_journal_exploration.py @ 09a05c8e, the journal's exploration): pJ per access of one
# 128 KiB bank, by bank port width in bits (read, write).
BANK = {32: (12.22, 9.21), 36: (13.19, 10.89), 64: (17.96, 13.38), 128: (26.0, 23.65), 256: (41.54, 45.95)}
BANK_KIB = 128


def bank_energy(width):
    if width in BANK:
        return BANK[width], "pool"
    lo, hi = 64, 128  # only 72-bit banks are missing: linear in width between 64 and 128 bits
    assert lo < width < hi, width
    t = (width - lo) / (hi - lo)
    return tuple(BANK[lo][i] + t * (BANK[hi][i] - BANK[lo][i]) for i in range(2)), "interp"


def memory(name, mib, bytes_per_cycle, keeps, fanout=None):
    banks = int(mib * 1024 / BANK_KIB)
    width = bytes_per_cycle * 8 // banks
    (r, w), how = bank_energy(width)
    note = (f"# {banks} banks of 128 KiB, {width} bits each: "
            + (f"{r} / {w} pJ per bank access (pool)" if how == "pool" else
               f"{r:.6g} / {w:.6g} pJ per bank access, DERIVED by linear interpolation between the pool's "
               f"64- and 128-bit banks (the pool has no {width}-bit bank)")
            + f" -> x 8 / {width} per byte")
    s = f"\n[[core.level]]\n{note}\nname = \"{name}\"\nsize_kb = {int(mib * 1024)}\nword_bits = 8\n"
    s += f"read_bandwidth = {bytes_per_cycle}\nwrite_bandwidth = {bytes_per_cycle}\n"
    s += f"read_pj = {r * 8 / width!r}\nwrite_pj = {w * 8 / width!r}\nkeeps = {keeps}\n"
    if fanout:
        s += f"fanout = {fanout}\n"
    return s


# Registers: the pool's smallest (reg_64B_1r1w_8b, 0.06 pJ per byte) for the 4 B PE register, its
# 256 B two-port 16-bit register (0.258 / 0.356 pJ per 16 bits) for the 128 B output registers:
# both DERIVED as the nearest pool entry at or above the size (upper bounds).
PE_REG = "read_pj = 0.06\nwrite_pj = 0.06\n"
OUT_REG = "read_pj = 0.129\nwrite_pj = 0.178\n"

K_AXIS = '["K", "N"], {a}_reuse = ["input"]'


def ws_core(n, count):
    rows, cols, c, k, amib, abw, wmib, wbw = WS[n]
    s = f"\n[[core]]\nname = \"ws\"\ncount = {count}\nruns = [\"mac\"]\n"
    s += "\n[core.compute]\nname = \"MAC\"\nenergy_pj = 0.04\n"
    s += memory("W_mem", wmib, wbw, '["weight"]')
    s += memory("Act_mem", amib, abw, '["input", "output"]',
                f'{{ x = {k}, x_ranks = ["K", "N"], x_reuse = ["input"] }}')
    s += ("\n[[core.level]]\nname = \"col_out_reg\"  # 128 B of partial sums per column\nsize_bytes = 128\nword_bits = 8\n"
          + OUT_REG + 'keeps = ["output"]\n'
          + f'fanout = {{ x = {c}, x_ranks = ["C", "K"], x_reuse = ["output"], y = 3, y_ranks = ["S"], y_reuse = ["output"] }}\n')
    s += ("\n[[core.level]]\nname = \"row_fy\"  # no storage: the FY share of the rows (C x FX x FY = "
          f"{c} x 3 x 3 = {rows})\nentries = 1\nword_bits = 8\nkeeps = []\n"
          'fanout = { x = 3, x_ranks = ["R"], x_reuse = ["output"] }\n')
    s += "\n[[core.level]]\nname = \"pe_reg\"  # 4 B per PE: the stationary weight\nsize_bytes = 4\nword_bits = 8\n" + PE_REG + 'keeps = ["weight"]\n'
    return s


def os_core(n, count):
    rows, cols, ox, k, amib, abw, wmib, wbw = OS[n]
    s = f"\n[[core]]\nname = \"os\"\ncount = {count}\nruns = [\"mac\"]\n"
    s += "\n[core.compute]\nname = \"MAC\"\nenergy_pj = 0.04\n"
    s += memory("W_mem", wmib, wbw, '["weight"]')
    s += memory("Act_mem", amib, abw, '["input", "output"]',
                f'{{ x = {k}, x_ranks = ["K", "N"], x_reuse = ["input"] }}')
    s += ("\n[[core.level]]\nname = \"out_buf\"  # output local buffer: 128 B per column\nsize_bytes = 128\nword_bits = 8\n"
          + OUT_REG + 'keeps = ["output"]\n'
          + f'fanout = {{ y = {ox}, y_ranks = ["Q", "M"], y_reuse = ["weight"] }}\n')
    s += "\n[[core.level]]\nname = \"pe_reg\"  # 4 B per PE: the stationary output\nsize_bytes = 4\nword_bits = 8\n" + PE_REG + 'keeps = ["output"]\n'
    return s


def system(n, ws):
    name = f"stream_t3_{n}c_{ws}ws"
    s = f"""# Generated by scripts/stream_t3_presets.py; do not edit by hand.
# Stream (Symons et al.) Table 3: {n} core(s), {ws} weight stationary and {n - ws} output stationary, the
# iso-area systems of Section 6.2 (2^12 PEs, 4 MiB of activation + weight memory in total; the WS
# arrays have C x FX x FY = 72/64 times as many rows as 2^12 allows, as in the table). Sizes,
# bandwidths and dataflows are the table's. Energies are what Stream ships: MAC 0.04 pJ (its
# tpu_like core and exploration cores), memories from its 22 nm CACTI pool (see each level),
# DRAM 650 pJ per 64-bit access (the pool's dram_sp) = 81.25 pJ per byte; core-to-core bus and
# off-chip port at 0 pJ as in every Stream hardware file (the paper gives no link energy).
name = "{name}"
description = "Stream Table 3: {n} core(s), {ws} WS + {n - ws} OS, 256-bit bus, 128-bit port to 256 MiB DRAM"

[offchip]
name = "DRAM"
size_kb = {256 * 1024}
word_bits = 8
shared_bandwidth = 16   # the 128-bit port, in bytes per cycle
energy_pj = 81.25

[[offchip.port]]
bits_per_cycle = 128
"""
    if ws:
        s += ws_core(n, ws)
    if n - ws:
        s += os_core(n, n - ws)
    if n > 1:
        s += "\n[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 256\n"
    return name, s


out = pathlib.Path("presets/arch")
for n in (1, 2, 4, 8):
    for ws in range(n + 1):
        name, text = system(n, ws)
        (out / f"{name}.toml").write_text(text)
