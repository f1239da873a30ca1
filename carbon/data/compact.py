#!/usr/bin/env python3
"""Regenerates carbon/data/ from the Electricity Maps 2023 exports.

usage: carbon/data/compact.py SRC_DIR   (SRC_DIR holds <FILE>_2023_hourly.csv)

Keeps only the timestamp and the direct intensity, in the simple CSV format
("timestamp,gco2_per_kwh"), one file per zone named after the Zone Id inside
the export, and writes zones.csv. Values are copied as written (no rounding).
"""
import csv, os, sys

CONTINENT = {"AU": "Oceania", "BR": "South America", "CL": "South America", "CA": "North America",
             "US": "North America", "DE": "Europe", "GB": "Europe", "IN": "Asia", "JP": "Asia",
             "KR": "Asia", "SG": "Asia", "ZA": "Africa"}

def main(src):
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "2023")
    os.makedirs(out_dir, exist_ok=True)
    zones = []
    for fn in sorted(os.listdir(src)):
        if not fn.endswith("_2023_hourly.csv"):
            continue
        alias = fn[: -len("_2023_hourly.csv")]
        with open(os.path.join(src, fn), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        zone = rows[0]["Zone Id"]
        name = rows[0]["Zone Name"]
        direct = "Carbon Intensity gCO₂eq/kWh (direct)"
        est = sum(1 for r in rows if r["Data Estimated"].strip().lower() == "true")
        zero = sum(1 for r in rows if float(r[direct]) == 0.0)
        with open(os.path.join(out_dir, zone + ".csv"), "w", encoding="utf-8") as o:
            o.write("timestamp,gco2_per_kwh\n")
            for r in rows:
                assert r["Zone Id"] == zone
                o.write(r["Datetime (UTC)"].replace(" ", "T")[:16] + "Z," + r[direct] + "\n")
        notes = []
        if est == len(rows):
            notes.append("every hour estimated by Electricity Maps (model output)")
        if zero:
            notes.append(f"{zero} hours with direct intensity 0")
        zones.append((zone, alias if alias != zone else "", name, CONTINENT[zone.split("-")[0]], est, "; ".join(notes)))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "zones.csv"), "w", encoding="utf-8") as o:
        o.write("zone,alias,name,continent,estimated_hours,note\n")
        for z in zones:
            o.write(",".join(str(x) for x in z) + "\n")

if __name__ == "__main__":
    main(sys.argv[1])
