"""The word-problem testbed's stories: for each, the wordings of its opening, of each operation and of its question.

A story is a template family: ``data_prep.word_problems`` draws one story per problem, then one wording per
sentence. Whole stories are held out (``HELDOUT``): their problems go to ``heldout.jsonl`` alone, so that split tests
wordings and settings the train split never has (a shop's shelf, a bus, packs of batteries, teams, day-by-day
comparisons: "twice as many as on Monday"). Fields a wording may use: ``{name}`` (a person), ``{p}`` / ``{q}`` / ``{o}``
(He / he / him or She / she / her), ``{pos}`` (his / her), ``{name_pos}`` ("Tom's"), ``{n}`` (the operand),
``{item}`` (the story's noun), ``{times}`` ("twice",
"three times", "6 times"), ``{part}`` ("half", "a third", "one sixth"), ``{day}`` / ``{prev}`` (this step's day and
the one before; the opening's day is Monday). Every wording leaves the running count as the story's subject: after
``div`` it is one of the equal shares.

    python -c "from data_prep import stories; print(sorted(stories.STORIES))"
"""

from __future__ import annotations

from dataclasses import dataclass

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_PARTS = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth"}
_WORDS = {6: "sixth", 7: "seventh", 8: "eighth", 9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth"}


def times(n: int) -> str:
    """``2 -> "twice"``, ``3 -> "three times"``, ``4 -> "four times"``, ``5 -> "five times"``, else ``"<n> times"``."""
    return {2: "twice", 3: "three times", 4: "four times", 5: "five times"}.get(n, f"{n} times")


def part(n: int) -> str:
    """``2 -> "half"``, ``3 -> "a third"``, ``4 -> "a quarter"``, ``5 -> "a fifth"``, ``6 -> "one sixth"``, else
    ``"1/<n>"``."""
    return _PARTS.get(n) or (f"one {_WORDS[n]}" if n in _WORDS else f"1/{n}")


@dataclass(frozen=True)
class Story:
    items: tuple[str, ...]  # the story's nouns, one drawn per problem
    opening: tuple[str, ...]
    add: tuple[str, ...]
    sub: tuple[str, ...]
    mul: tuple[str, ...]
    div: tuple[str, ...]
    question: tuple[str, ...]


STORIES: dict[str, Story] = {
    "collection": Story(
        items=tuple(
            "apples,pencils,stickers,marbles,cookies,books,stamps,shells,cards,eggs,balloons,coins,crayons,flowers,"
            "toy cars".split(",")
        ),
        opening=(
            "{name} has {n} {item}.",
            "There are {n} {item} in {name}'s room.",
            "{name} starts the day with {n} {item}.",
        ),
        add=(
            "{p} buys {n} more.",
            "{p} finds {n} more.",
            "A friend gives {o} {n} more.",
            "{p} gets {n} more.",
            "{p} is given another {n}.",
        ),
        sub=("{p} gives {n} to a friend.", "{p} loses {n}.", "{p} uses {n}.", "{p} sells {n}.", "{n} of them break."),
        mul=(
            "Then {q} gets enough to have {n} times as many.",
            "{p} ends up with {n} times as many as before.",
            "{p} collects more until {q} has {times} as many.",
        ),
        div=(
            "{p} shares them equally among {n} friends and keeps one share.",
            "{p} splits them into {n} equal groups and keeps one group.",
        ),
        question=(
            "How many {item} does {name} have now?",
            "How many {item} does {name} have in the end?",
            "How many {item} are left with {name}?",
        ),
    ),
    "savings": Story(
        items=("dollars",),
        opening=("{name} has {n} dollars in a piggy bank.", "{name} saves {n} dollars."),
        add=("{p} earns {n} dollars more.", "{p} gets {n} dollars for {pos} birthday.", "{p} adds {n} dollars."),
        sub=("{p} spends {n} dollars on lunch.", "{p} pays {n} dollars for a book.", "{p} takes out {n} dollars."),
        mul=("By the summer {q} has {times} as much money.", "{name_pos} savings grow to {n} times as much."),
        div=("{p} splits the money equally into {n} envelopes and keeps one envelope.",),
        question=("How many dollars does {name} have now?", "How much money, in dollars, does {name} have left?"),
    ),
    "library": Story(
        items=("books", "magazines", "comics"),
        opening=("A library cart holds {n} {item}.", "The school library has {n} {item} on one cart."),
        add=("The librarian puts {n} more on it.", "{name} donates {n} {item}.", "A delivery adds {n} {item}."),
        sub=("Readers borrow {n} of them.", "{n} are taken away to be repaired.", "{name} checks out {n} {item}."),
        mul=("After a book fair there are {n} times as many.", "The number of {item} becomes {times} as large."),
        div=("The {item} are shared equally among {n} classrooms, and one classroom's share stays.",),
        question=("How many {item} are there now?", "How many {item} are on it at the end?"),
    ),
    "farm": Story(
        items=("sheep", "chickens", "goats", "ducks", "cows"),
        opening=("A farm has {n} {item}.", "Farmer {name} keeps {n} {item}."),
        add=("The farmer buys {n} more.", "{n} new {item} are born.", "A neighbour brings {n} {item}."),
        sub=("{n} are sold at the market.", "{n} of the {item} wander away.", "The farmer gives away {n}."),
        mul=("Years later the farm has {n} times as many.", "The herd grows to {times} its size."),
        div=("The {item} are split equally into {n} fields and one field's group is counted.",),
        question=("How many {item} are there now?", "How many {item} does the farm have at the end?"),
    ),
    "garden": Story(
        items=("roses", "tulips", "tomato plants", "trees", "sunflowers"),
        opening=("{name} plants {n} {item}.", "{name_pos} garden has {n} {item}."),
        add=("{p} plants {n} more.", "{n} more {item} are planted."),
        sub=("{n} of them die in the frost.", "Rabbits eat {n} of them.", "{p} pulls out {n}."),
        mul=("Next spring there are {n} times as many.", "The garden ends up with {times} as many {item}."),
        div=("The {item} are moved equally into {n} beds and one bed is counted.",),
        question=("How many {item} are in the garden now?", "How many {item} are there in the end?"),
    ),
    "bakery": Story(
        items=("muffins", "rolls", "pies", "cupcakes", "loaves"),
        opening=("A baker makes {n} {item}.", "The bakery starts the morning with {n} {item}."),
        add=("The baker makes {n} more.", "Another tray of {n} comes out of the oven."),
        sub=("Customers buy {n}.", "{n} of them are eaten by the staff.", "{name} buys {n}."),
        mul=("For a party the baker makes it {n} times as many.", "By noon there are {times} as many."),
        div=("The {item} are packed equally into {n} boxes and one box is kept.",),
        question=("How many {item} does the bakery have now?", "How many {item} are left?"),
    ),
    # held-out stories: only in heldout.jsonl
    "shop": Story(
        items=("cans of soup", "bottles of juice", "bags of rice", "jars of jam"),
        opening=("A shop's shelf holds {n} {item}.", "The corner shop has {n} {item} on the shelf."),
        add=("A delivery brings {n} more.", "The clerk stocks {n} more.", "{name} restocks the shelf with {n} more."),
        sub=("Shoppers take {n} off the shelf.", "{name} buys {n} of them.", "{n} are sold before lunch."),
        mul=("The manager orders enough to make it {times} as many.",),
        div=("The {item} are packed equally into {n} crates and only one crate is left on the shelf.",),
        question=("How many {item} are on the shelf now?", "How many {item} does the shelf hold at closing time?"),
    ),
    "bus": Story(
        items=("passengers",),
        opening=("A bus leaves the station with {n} passengers.", "There are {n} people on a bus."),
        add=("At the next stop, {n} people get on.", "{n} more passengers get on at the market."),
        sub=("At the next stop, {n} people get off.", "{n} passengers get off at the school."),
        mul=("By the city centre there are {times} as many passengers.",),
        div=("The passengers split equally into {n} groups and only one group stays on the bus.",),
        question=("How many passengers are on the bus now?", "How many people are on the bus at the last stop?"),
    ),
    "batteries": Story(
        items=("batteries",),
        opening=("A drawer holds {n} batteries.", "{name} has {n} batteries."),
        add=("{name} opens a pack of {n} batteries and puts them in.", "{name} buys another pack of {n}."),
        sub=("{name} puts {n} of them in a torch.", "{n} batteries go into the remote controls."),
        mul=("{name} buys packs until there are {times} as many.",),
        div=("The batteries are shared equally among {n} toys and one toy's share stays in the drawer.",),
        question=("How many batteries are in the drawer now?", "How many batteries does {name} have left?"),
    ),
    "teams": Story(
        items=("children", "players"),
        opening=("{n} {item} come to the sports day.", "A club has {n} {item}."),
        add=("{n} more {item} arrive late.", "{n} new {item} join."),
        sub=("{n} {item} go home early.", "{n} of the {item} leave."),
        mul=("In the afternoon there are {times} as many {item}.",),
        div=("The {item} form {n} equal teams, and only one team stays to play.",),
        question=("How many {item} are there now?", "How many {item} are left playing?"),
    ),
    "days": Story(
        items=("pages",),
        opening=("On Monday, {name} reads {n} pages.", "{name} reads {n} pages of a book on Monday."),
        add=("On {day}, {q} reads {n} more pages than on {prev}.", "{p} reads {n} pages more on {day} than on {prev}."),
        sub=("On {day}, {q} reads {n} fewer pages than on {prev}.",),
        mul=("On {day}, {q} reads {times} as many pages as on {prev}.",),
        div=("On {day}, {q} reads {part} as many pages as on {prev}.",),
        question=("How many pages does {name} read on {day}?",),
    ),
}
HELDOUT = ("shop", "bus", "batteries", "teams", "days")
