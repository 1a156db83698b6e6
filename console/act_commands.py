"""The command palette's acts and views, for the marked runs or the one under the cursor."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class ActCommands(Provider):
    """Offers what the main screen's keys do, by name. Read-only consoles offer no act.

    Names and help hold no text from the store: the palette parses them as markup.
    """

    def _commands(self) -> list[tuple[str, str, str]]:
        commands = getattr(self.screen, "palette_commands", None)
        return commands() if commands else []

    async def discover(self) -> Hits:
        for name, help_text, action in self._commands():
            yield DiscoveryHit(name, partial(self.screen.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, action in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.screen.run_action, action), help=help_text)
