"""The cleaner strips wrappers (preambles, titles, labels, trailing notes) and never story text."""

import pytest

from generate.clean import clean_feedback, clean_reply, clean_story
from tests.generate.smollm2_replies import REPLIES, SAME

ISSUE_CASES = [
    # A label on the same line as the story: only the label goes.
    ("Here's my story: The ship woke before its crew.", "The ship woke before its crew."),
    ("Story: Once the moons aligned, the river rose.", "Once the moons aligned, the river rose."),
    # Interjections that open a story sentence are story.
    ("Certainly the ship was doomed. Nobody said it aloud.", "Certainly the ship was doomed. Nobody said it aloud."),
    ("Sure enough, the colony woke to silence.", "Sure enough, the colony woke to silence."),
    ("Certainly, the ship was doomed.\nThe crew knew it.", "Certainly, the ship was doomed.\nThe crew knew it."),
    ("Here is the thing about Mars: nobody stays.", "Here is the thing about Mars: nobody stays."),
    # Whole lines of chatter go.
    ("Sure! Here's a story about a lonely probe:\n\nThe probe counted stars.", "The probe counted stars."),
    ("Certainly! I'd be happy to help.\n\nThe probe counted stars.", "The probe counted stars."),
    ("As the Ecological Writer, I rewrote the story around the river:\nThe river rose.", "The river rose."),
    # Trailing notes go; a story's own last line stays.
    ("The probe counted stars.\n\nI hope you enjoy this story!", "The probe counted stars."),
    ("The probe counted stars.\nI hope the stars remember us.", "The probe counted stars.\nI hope the stars remember us."),
    ("It was the end of the story for the crew.", "It was the end of the story for the crew."),
    ("The probe counted stars.\n\nThe End.\n\nWord count: 212", "The probe counted stars."),
]


@pytest.mark.parametrize(("raw", "clean"), ISSUE_CASES)
def test_clean_story_strips_wrappers_only(raw, clean):
    assert clean_story(raw) == clean


def test_a_reply_that_is_only_a_wrapper_is_blank():
    assert clean_story("Here's my story:") == ""
    assert clean_story("Sure! Here is the revised story.\n\n(Word count: 0)") == ""


@pytest.mark.parametrize(("raw", "clean"), [
    ("Sure! Here's my feedback:\n\nThe ending of the story feels rushed.",
     "The ending of the story feels rushed."),
    ("Certainly the middle drags. Cut the second scene.", "Certainly the middle drags. Cut the second scene."),
    ("Your twist works.\n\nI hope this helps!", "Your twist works."),
    ("The end of the story feels rushed; give the keeper one more scene.",
     "The end of the story feels rushed; give the keeper one more scene."),
    ("<<<STORY\nMake the robot braver.\nSTORY>>>", "Make the robot braver."),
])
def test_clean_feedback(raw, clean):
    assert clean_feedback(raw) == clean


@pytest.mark.parametrize(("role", "raw", "clean"), REPLIES)
def test_real_smollm2_replies(role, raw, clean):
    """Replies of the bundled model to our prompts, verbatim (tests/generate/smollm2_replies.py)."""
    assert clean_reply(role, raw) == (raw if clean is SAME else clean)


@pytest.mark.parametrize("last_line", [
    "I hope you find your way home, Mara.", "Thank you for everything, she said.", "Would you like to see the sea?",
    "300 words later, the signal stopped.", "Let me know when the ship wakes.", "Thanks for the ride.",
])
def test_a_story_keeps_its_own_last_line(last_line):
    story = f"The probe counted stars.\n\n{last_line}"
    assert clean_story(story) == story


@pytest.mark.parametrize("note", [
    "(Word count: 301)", "298 words", "**The End**", "End of Story.", "---", "I hope you enjoyed this story!",
    "Let me know if you would like any changes.", "Feel free to ask for another version.",
    "Would you like me to write another one?", "Note: I used the river as the twist.\nIt mirrors the prompt.",
])
def test_a_story_loses_its_trailing_notes(note):
    assert clean_story(f"The probe counted stars.\n\n{note}") == "The probe counted stars."
