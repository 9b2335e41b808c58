from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.agreement_report import agreement_report
from annotation.models import ComparisonSet


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class Command(BaseCommand):
    help = "Agreement between a comparison set's reviewers, and between people and each pair scorer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--set", dest="set_name", required=True, help="comparison set name")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--bucket", choices=["day", "week"], default=None, help="trend bucket (default: auto)")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["set_name"]
        comparison_set = ComparisonSet.objects.filter(name=name).first()
        if comparison_set is None:
            raise CommandError(f"no comparison set named {name!r}")
        report = agreement_report(comparison_set, bucket=options["bucket"])
        if options["json"]:
            self.stdout.write(json.dumps(report, sort_keys=True))
            return
        self.stdout.write(self._table(report))

    def _table(self, r: dict[str, Any]) -> str:
        lines = [
            f"set {r['set']}: {r['pairs']} pairs, {r['judged_pairs']} judged, {r['judgements']} judgements, "
            f"{r['items']} with two or more, {r['disagreements']} disagreements ({r['resolved']} resolved)",
            f"observed agreement   {_figure(r['observed_agreement'])}",
            f"Cohen's kappa        {_figure(r['cohen_kappa'])}  (mean over reviewer pairs)",
            f"Fleiss' kappa        {_figure(r['fleiss_kappa'])}  ({r['fleiss_items']} pairs with "
            f"{r['fleiss_raters']} judgements; {r['fleiss_left_out']} left out)",
            f"Krippendorff's alpha {_figure(r['krippendorff_alpha'])}",
            "",
            f"{'reviewer':<24} {'judged':>6} {'A':>4} {'B':>4} {'tie':>4} {'bad':>4} {'w/ majority':>11}",
        ]
        for row in r["reviewers"]:
            c = row["choices"]
            lines.append(
                f"{row['reviewer'][:24]:<24} {row['judgements']:>6} {c['A']:>4} {c['B']:>4} {c['tie']:>4} "
                f"{c['both_bad']:>4} {_figure(row['with_majority']):>11}"
            )
        lines += ["", f"{'scorer':<24} {'pairs':>6} {'scored':>6} {'agree':>6} {'ties':>5} {'rate':>6} {'kappa':>6}"]
        for name, s in sorted(r["scorers"].items()):
            lines.append(
                f"{name[:24]:<24} {s['pairs']:>6} {s['scored']:>6} {s['agreed']:>6} {s['ties']:>5} "
                f"{_figure(s['agreement']):>6} {_figure(s['kappa']):>6}"
            )
        return "\n".join(lines)
