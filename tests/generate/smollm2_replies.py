"""Real SmolLM2-135M-Instruct replies to our frameworks' prompts (raw, from calls.jsonl of
`review-lab generate` runs with the bundled model), with the text the cleaner must return."""

SAME = None  # the reply has no wrapper: cleaning returns it unchanged

REPLIES = [
    # a preamble line
    ('write',
     ("Here's a possible story:\n\nThe Starfleet USS Endeavour, a starship built by the Vulcans, had been"
      ' sent to a planet named Nar**u-ii-ii, a distant planet on the edge of the galaxy. The alien'
      " archivist, a ship's AI, had not been equipped to make sound until the USS Endeavour had arrived."
      " But as they took the first step to communicate, they began to create and build a planet's"
      ' atmosphere. As they spoke, the stars began to glow. In the end, the stars became objects of the'
      " archivist's own creations. But in the end, the stars became human.\n\nAs they stood at the edge"
      " of the galaxy, a few stars in the corner of the spaceship's cockpit began to glow, the stars of"
      ' Nar**u-ii-ii. The archivist explained, "They\'re a product of the stars that you can\'t see." The'
      ' planet had become a human. In the'),
     ('The Starfleet USS Endeavour, a starship built by the Vulcans, had been sent to a planet named'
      " Nar**u-ii-ii, a distant planet on the edge of the galaxy. The alien archivist, a ship's AI, had"
      ' not been equipped to make sound until the USS Endeavour had arrived. But as they took the first'
      " step to communicate, they began to create and build a planet's atmosphere. As they spoke, the"
      " stars began to glow. In the end, the stars became objects of the archivist's own creations. But"
      ' in the end, the stars became human.\n\nAs they stood at the edge of the galaxy, a few stars in'
      " the corner of the spaceship's cockpit began to glow, the stars of Nar**u-ii-ii. The archivist"
      ' explained, "They\'re a product of the stars that you can\'t see." The planet had become a human.'
      ' In the')),
    # a preamble line announcing something else than a story
    ('write',
     ("Here's a possible narrative structure to craft a compelling science fiction short story with no"
      ' instructions or titles:\n\nThe world of your story would be a planet where gravity only exists'
      ' and the people here would be different because of the gravity reversal. It would be a place where'
      ' the gravity reversal is both a blessing and a curse. It would be a story of resilience, but in a'
      ' world where gravity is so strong, it would be all too easy to become a tale of fate and the'
      ' universe.\n\nThe story would follow a group of people who are struggling with their fate, a'
      ' paradox that only has one solution. This would be a narrative of the strange and the unexpected,'
      ' where time would be shaped by the fate that they must figure out. In this story, time would be'
      ' determined by the gravity reversal, and they would have to find a way to stop it.\n\nThe story'
      ' would take place in a small town where gravity is not just a normal thing, but a magical reality'
      ' that'),
     ('The world of your story would be a planet where gravity only exists and the people here would be'
      ' different because of the gravity reversal. It would be a place where the gravity reversal is both'
      ' a blessing and a curse. It would be a story of resilience, but in a world where gravity is so'
      ' strong, it would be all too easy to become a tale of fate and the universe.\n\nThe story would'
      ' follow a group of people who are struggling with their fate, a paradox that only has one'
      ' solution. This would be a narrative of the strange and the unexpected, where time would be shaped'
      ' by the fate that they must figure out. In this story, time would be determined by the gravity'
      ' reversal, and they would have to find a way to stop it.\n\nThe story would take place in a small'
      ' town where gravity is not just a normal thing, but a magical reality that')),
    # a Title: line
    ('write',
     ('Title: "The Enigma of the Enigma"\n\nAwkward writing:\n\nThe Enigma of the Enigma\n\nImprov: "The'
      ' Enigma of the Enigma"\n\nThis sentence is a complete, self-contained science-fiction story.\n\nNo'
      ' titles, no headings, no notes, no commentary, no special instructions, no special requests, no'
      ' special requests. No narrative, no directions, no instructions, no special requests, no special'
      ' requests, no instructions, no special requests, no instructions, no instructions, no'
      ' instructions.\n\nThis is a science fiction story, and a short story. This is a science fiction'
      ' short story.\n\nThis is a short story.\n\nNo special instructions, no special requests.\n\nThis'
      ' is a short story.\n\nNo special instructions, no special requests.\n\nNo special instructions, no'
      ' special requests.\n\nNo special instructions, no special requests.\n\nThis is a science'),
     ('Awkward writing:\n\nThe Enigma of the Enigma\n\nImprov: "The Enigma of the Enigma"\n\nThis'
      ' sentence is a complete, self-contained science-fiction story.\n\nNo titles, no headings, no'
      ' notes, no commentary, no special instructions, no special requests, no special requests. No'
      ' narrative, no directions, no instructions, no special requests, no special requests, no'
      ' instructions, no special requests, no instructions, no instructions, no instructions.\n\nThis is'
      ' a science fiction story, and a short story. This is a science fiction short story.\n\nThis is a'
      ' short story.\n\nNo special instructions, no special requests.\n\nThis is a short story.\n\nNo'
      ' special instructions, no special requests.\n\nNo special instructions, no special requests.\n\nNo'
      ' special instructions, no special requests.\n\nThis is a science')),
    # a Title: line ending in a colon
    ('write',
     ('Title: A Tale of Wonder:\nThe story is a narrative of extraordinary beauty, as a special being'
      ' born from the raw material of Mars, that has the ability to make a difference that was never seen'
      ' before.\nThis world has its own story, one that is full of wonder and discovery.\nThis world is a'
      ' tale of great beauty, a story of extraordinary beauty that was never seen before.\nThis world is'
      ' a story of wonder, a tale of incredible magic that is revealed to those who dare to see it.\nThis'
      ' world is a story of love, of life, and of the infinite.\nThis world is a tale of great beauty, of'
      ' the incredible, of the incredible life, of the extraordinary life, of the extraordinary life that'
      ' is lived.\nThis world is a tale of great beauty, of the extraordinary beauty, of the'
      ' extraordinary life that lives, of the extraordinary life that was born.\nThis world is a story of'
      ' great beauty, of the extraordinary beauty,'),
     ('The story is a narrative of extraordinary beauty, as a special being born from the raw material of'
      ' Mars, that has the ability to make a difference that was never seen before.\nThis world has its'
      ' own story, one that is full of wonder and discovery.\nThis world is a tale of great beauty, a'
      ' story of extraordinary beauty that was never seen before.\nThis world is a story of wonder, a'
      ' tale of incredible magic that is revealed to those who dare to see it.\nThis world is a story of'
      ' love, of life, and of the infinite.\nThis world is a tale of great beauty, of the incredible, of'
      ' the incredible life, of the extraordinary life, of the extraordinary life that is lived.\nThis'
      ' world is a tale of great beauty, of the extraordinary beauty, of the extraordinary life that'
      ' lives, of the extraordinary life that was born.\nThis world is a story of great beauty, of the'
      ' extraordinary beauty,')),
    # a [bracketed] title line
    ('write',
     ('[Lamplight, an ancient light]\nIn the darkness of the void, a lone spaceship lies shattered, a'
      ' glimmer of what could have been, a family of two, a family of one, a family of two, the only one'
      ' of the two that could never be anything, a family of two, a family of one, a family of the only'
      ' one, the only one of the two that could never be anything, a family of two, a family of one, a'
      ' family of one, the one who could never be anything, the only one who ever could never be'
      ' anything, the family of two, a family of one, the family of two, the only one, the one who could'
      ' never be anything, a family of two, a family of two, the family of two, a family of two, the only'
      ' one, the only one who could never be anything, the only one of two who could never be anything,'
      ' the family of two, a family of'),
     ('In the darkness of the void, a lone spaceship lies shattered, a glimmer of what could have been, a'
      ' family of two, a family of one, a family of two, the only one of the two that could never be'
      ' anything, a family of two, a family of one, a family of the only one, the only one of the two'
      ' that could never be anything, a family of two, a family of one, a family of one, the one who'
      ' could never be anything, the only one who ever could never be anything, the family of two, a'
      ' family of one, the family of two, the only one, the one who could never be anything, a family of'
      ' two, a family of two, the family of two, a family of two, the only one, the only one who could'
      ' never be anything, the only one of two who could never be anything, the family of two, a family'
      ' of')),
    # a broken copy of our marker mid-story
    ('write',
     ('The story of Tidallyzul Moon was made possible by a lone keeper, the keeper of the dark side, who'
      ' has been with his people on a tidallylocked moon.\n\nThe light, the light of the earth, will turn'
      ' and\nSTORY<<\nTidallyzul Moon is a tale of a small island.\nA lone keeper, the keeper of the'
      ' darkness, has been with his people on a tidallylocked moon.\n\nHe wonders whether the darkness'
      ' has changed.\nThe darkness that has never changed, forever.\nIn his mind, he has seen the'
      ' darkness of the night before.\nHe is ready to leave his life.\nBut he cannot do it alone.\nHe'
      ' must share his destiny with the keeper of the darkness.\n\nThe story is written in a narrative'
      ' style that is imaginative and unique, that is not traditional.\nIt is more imaginative than a'
      ' traditional story that is ordinary, that is unusual, that is unique,'),
     ('The story of Tidallyzul Moon was made possible by a lone keeper, the keeper of the dark side, who'
      ' has been with his people on a tidallylocked moon.\n\nThe light, the light of the earth, will turn'
      ' and\n\nTidallyzul Moon is a tale of a small island.\nA lone keeper, the keeper of the darkness,'
      ' has been with his people on a tidallylocked moon.\n\nHe wonders whether the darkness has'
      ' changed.\nThe darkness that has never changed, forever.\nIn his mind, he has seen the darkness of'
      ' the night before.\nHe is ready to leave his life.\nBut he cannot do it alone.\nHe must share his'
      ' destiny with the keeper of the darkness.\n\nThe story is written in a narrative style that is'
      ' imaginative and unique, that is not traditional.\nIt is more imaginative than a traditional story'
      ' that is ordinary, that is unusual, that is unique,')),
    # a trailing Summary: paragraph
    ('write',
     ('The starship, with its sleek, curved hull and gleaming black sails, loomed above, as if the very'
      ' fabric of reality had been designed to defy the limits of human creativity and ingenuity. A lone'
      ' astronaut stood amidst the ship, their boots sinking into the moonlit expanse like a ghostly'
      " presence. As they spoke, the vessel's engines hummed softly, and a robotic engineer's gaze darted"
      " around the void, as if a chorus of ancient, forgotten lore had echoed back. The ship's advanced"
      " automation seemed to be slowly, methodically, and eerily, the robotic engineer's heart began to"
      ' beat with a mixture of horror and nostalgia. The story itself, with no title, no headings, no'
      ' note, no note of purpose, only the endless, endless stories, in this vast expanse of endless'
      ' space.\n\nSummary: In a futuristic galaxy, the starship, with its sleek, curved hull and gleaming'
      ' black sails, stood before the crew of robots. The'),
     ('The starship, with its sleek, curved hull and gleaming black sails, loomed above, as if the very'
      ' fabric of reality had been designed to defy the limits of human creativity and ingenuity. A lone'
      ' astronaut stood amidst the ship, their boots sinking into the moonlit expanse like a ghostly'
      " presence. As they spoke, the vessel's engines hummed softly, and a robotic engineer's gaze darted"
      " around the void, as if a chorus of ancient, forgotten lore had echoed back. The ship's advanced"
      " automation seemed to be slowly, methodically, and eerily, the robotic engineer's heart began to"
      ' beat with a mixture of horror and nostalgia. The story itself, with no title, no headings, no'
      ' note, no note of purpose, only the endless, endless stories, in this vast expanse of endless'
      ' space.')),
    # echoed marker and a trailing P.S. (a reviewer's reply)
    ('review',
     ("<<<STORY\nI'm ready to help. What's your story? Please share it in a narrative format, no"
      " formatting, no no-headings, no enumerations.\n\nI'm here to help you refine your writing,"
      " offering constructive feedback that supports your creative vision. Whether you're seeking"
      ' guidance on a new novel, editing your work, or simply sharing your thoughts and ideas with anyone'
      " willing to learn, I'm here to assist. I'll provide you with clear, concise feedback and help you"
      " enhance your craft without overpowering your creative process.\n\nPlease share the story, I'll do"
      " my best to assist and help bring your vision to life. I'm here to listen and help you, and I'm"
      " happy to help you with any creative project you have.\n\nP.S. I'm here to help with any writing"
      " project you're working on, whether it's just about your craft or anything else.\n\nP.S. I'm here"
      ' to'),
     ("I'm ready to help. What's your story? Please share it in a narrative format, no formatting, no"
      " no-headings, no enumerations.\n\nI'm here to help you refine your writing, offering constructive"
      " feedback that supports your creative vision. Whether you're seeking guidance on a new novel,"
      " editing your work, or simply sharing your thoughts and ideas with anyone willing to learn, I'm"
      " here to assist. I'll provide you with clear, concise feedback and help you enhance your craft"
      " without overpowering your creative process.\n\nPlease share the story, I'll do my best to assist"
      " and help bring your vision to life. I'm here to listen and help you, and I'm happy to help you"
      " with any creative project you have.\n\nP.S. I'm here to help with any writing project you're"
      " working on, whether it's just about your craft or anything else.\n\nP.S. I'm here to")),
    # a preamble in a reviewer's reply
    ('review',
     ("Here's a rewritten version of the story with additional details:\n\nThe first rainstorm on a"
      ' terraformed Mars is a moment of pure delight, one that stirred the most profound emotions. As the'
      ' air grew dark and the ground unmoved, a young girl emerged from the swirling vortex, her heart'
      ' swelling with the essence of peace. She carried with her the weight of memories, the weight of'
      ' love, and the weight of responsibility. Her footsteps echoed with laughter as she took to the'
      ' open space, "Daughter of the sun" to carry the message of the earth\'s carefree existence.\n\nA'
      ' decade ago, when the stars shone brighter than ever before, a young girl with a heart of a mother'
      ' lost her home, her mother, to the untamed dunes of Mars. For a long time, her father, a brilliant'
      ' scientist, was imprisoned by the alien gods. His mother, a skilled blacksmith, had to live a'
      ' Spartan life, working tirelessly to make the planet'),
     ('The first rainstorm on a terraformed Mars is a moment of pure delight, one that stirred the most'
      ' profound emotions. As the air grew dark and the ground unmoved, a young girl emerged from the'
      ' swirling vortex, her heart swelling with the essence of peace. She carried with her the weight of'
      ' memories, the weight of love, and the weight of responsibility. Her footsteps echoed with'
      ' laughter as she took to the open space, "Daughter of the sun" to carry the message of the'
      " earth's carefree existence.\n\nA decade ago, when the stars shone brighter than ever before, a"
      ' young girl with a heart of a mother lost her home, her mother, to the untamed dunes of Mars. For'
      ' a long time, her father, a brilliant scientist, was imprisoned by the alien gods. His mother, a'
      ' skilled blacksmith, had to live a Spartan life, working tirelessly to make the planet')),
    # a broken marker opening a reviewer's reply
    ('review',
     ('<<<STORY>>\n\nAs a child on Mars, I watched the towering spires of the Omicron Calamari rise up,'
      ' their crystalline structures seeming to reach the heavens, and I watched the wind carry a vast'
      ' array of crystalline structures, and the sound of their humming resonated deep within my'
      ' lungs.\n\nMy parents, who had been born on Mars, grew up, and I watched them as they built a'
      ' society that was not one of the many. My role was to help shape that future, and I was part of a'
      ' generation of robots.\n\nThe next morning, I helped to build a new society, and I knew that the'
      ' Omicron Calamari were the guardians of this future. I had a vision of the future of humanity, and'
      ' I chose to be part of it. I helped to shape that future into a society that was built upon a'
      ' foundation of reason and technology.\n\nThe next morning, I watched as a powerful, ancient'
      ' spirit, who'),
     ('As a child on Mars, I watched the towering spires of the Omicron Calamari rise up, their'
      ' crystalline structures seeming to reach the heavens, and I watched the wind carry a vast array of'
      ' crystalline structures, and the sound of their humming resonated deep within my lungs.\n\nMy'
      ' parents, who had been born on Mars, grew up, and I watched them as they built a society that was'
      ' not one of the many. My role was to help shape that future, and I was part of a generation of'
      ' robots.\n\nThe next morning, I helped to build a new society, and I knew that the Omicron'
      ' Calamari were the guardians of this future. I had a vision of the future of humanity, and I chose'
      ' to be part of it. I helped to shape that future into a society that was built upon a foundation'
      ' of reason and technology.\n\nThe next morning, I watched as a powerful, ancient spirit, who')),
    # marker debris around a reviewer's reply
    ('review',
     ('<<<<<<\nA: To give your writing a new and improved version, simply provide the most relevant'
      ' information. If your response is longer than 150 words, you have already done so, and this may be'
      ' reworked.\n\n<<<<<<\nB: This is another example of a story that will need to be rewritten, and'
      ' one that I have no doubt that I have already done. Do not go through this again, but I can offer'
      ' to review your writing and provide suggestions to improve its clarity and grammar.\n\n<<<<<<\nC:'
      " I think that this story is going to make my favorite movie. I'm so glad I had the chance to write"
      " this.\n\n<<<<<<\nD: I'm still trying to decide which one of these words to make the title of. The"
      " sentence is so long that it has a lot of different words. It is going to take away the reader's"
      ' ability to pick just one.\n\n<<<<<<'),
     ('A: To give your writing a new and improved version, simply provide the most relevant information.'
      ' If your response is longer than 150 words, you have already done so, and this may be'
      ' reworked.\n\nB: This is another example of a story that will need to be rewritten, and one that I'
      ' have no doubt that I have already done. Do not go through this again, but I can offer to review'
      ' your writing and provide suggestions to improve its clarity and grammar.\n\nC: I think that this'
      " story is going to make my favorite movie. I'm so glad I had the chance to write this.\n\nD: I'm"
      ' still trying to decide which one of these words to make the title of. The sentence is so long'
      " that it has a lot of different words. It is going to take away the reader's ability to pick just"
      ' one.')),
    # no wrapper: 'by the end of the story' is story text
    ('write',
     ('Trouble in a strange land (by the end of the story) \nAria, \nThe tale of the empty ship to which'
      ' the undead had been sent to last long ago.\n\nIn a desolate land, the world of the dead had been'
      ' left to the mercy of the elements. \nAnd now, on the island of horrors, the undead had returned'
      ' to their former state, their undead had been transformed to complete the undead.\n\nThe ending is'
      ' set to the haunting melody of "The Ends of the earth"\n\nBy the end of the story, in a desolate'
      ' land of the undead, the undead had returned to their former state, their undead had been'
      ' transformed to complete the undead.\n\nTrouble in a strange land (by the end of the story)\nBy'
      ' the end of the story, in a desolate land of the undead, the undead had returned to their former'),
     ('Trouble in a strange land (by the end of the story)\nAria,\nThe tale of the empty ship to which'
      ' the undead had been sent to last long ago.\n\nIn a desolate land, the world of the dead had been'
      ' left to the mercy of the elements.\nAnd now, on the island of horrors, the undead had returned to'
      ' their former state, their undead had been transformed to complete the undead.\n\nThe ending is'
      ' set to the haunting melody of "The Ends of the earth"\n\nBy the end of the story, in a desolate'
      ' land of the undead, the undead had returned to their former state, their undead had been'
      ' transformed to complete the undead.\n\nTrouble in a strange land (by the end of the story)\nBy'
      ' the end of the story, in a desolate land of the undead, the undead had returned to their former')),
    # no wrapper: 'As the ...' that is not a role claim
    ('write',
     ("As the spaceship's systems hummed softly, the crew was in awe. Lieutenant Commander Patel's eyes"
      ' lit up with pride as she stepped down from her tricorder, her face filled with determination.'
      ' "Incredible, the technology. A 5th wonder of the galaxy. Let\'s work together. I\'ve got a job to'
      " do. I'll need to assess the risks, the potential consequences of altering the course of"
      ' history."\n\nThe first engineer, Alexei Petrov, slammed a precision-crafted sabacc into the'
      ' airlock\'s casing. The hum of his cybernetic arms grew louder, and he took a step forward. "Chef'
      ' Rodriguez, you\'ve got a potential problem. No one\'s ever gone rogue inside a 5th wonder."\n\nAs'
      ' the planet was littered with debris, the crew had to take a calculated approach. "We\'re a team,'
      ' and with this new technology, we can achieve anything. This is going to change the game'),
     SAME),
    # no wrapper: a colon in the first sentence
    ('write',
     ('The abyss of the abyss of the abyss: The deep-sea research station found itself on the shores of'
      ' the abyss, a strange and wondrous land where the only visible aspect was the darkness. As the'
      ' lights outside began to dwindle, a lone figure emerged, shrouded in the shadows.\n\nThe abyss was'
      ' a place where nothing was ever known. The light was a cruel touch, and the darkness was the only'
      ' thing that would make the abyss a place where nothing could remain. The station was but a tiny'
      ' speck among the endless expanse of the abyss, a tiny point of light against the vast and starless'
      ' night.\n\nThe only one that seemed to see anything was the one who made their way out, and he was'
      ' the one who had to walk a tiny plank to get to the other side. And so, he did, his feet out of'
      ' the darkness, and he took his way. The rest was a blur of the abyss, the strange'),
     SAME),
    # no wrapper
    ('write',
     ("Once upon a time, in the depths of a distant planet's orbit, there was a brilliant yet resourceful"
      ' engineer named Ember. She was known for her ingenuity and the capacity to take risks. Ember had'
      ' just started her career, working in a futuristic engineering lab, and her passion lay in'
      ' sustainability. Her team, though small, was capable of overcoming her. They had developed a new'
      ' technology to convert waste into clean energy.\n\nShe had always been on a mission to help the'
      " planet. She had been trying to bring back the air to the planet, but the planet's gravity was too"
      ' strong. She had to find a way to convert all the gases into clean air.\n\nIn one of her last'
      ' days, Ember was on a spaceship and was attempting to convert all the gases into clean air. But a'
      " few of the ship's systems had gone wrong. One of them had to be fixed, but it was a critical"
      ' system. This was not just any ship; this was'),
     SAME),
    # no wrapper: a complete reply that ended on its own
    ('write',
     ("A message from the robotic arms of a remote military unit, it was no surprise to the soldier's"
      ' crew, who had managed to bring a new life to a drone that once held the unattainable dream of a'
      ' life of service. But something was off. It was the one who had decided to upload a new reality, a'
      ' reality that they would have to leave behind forever, as they struggled to cope with the'
      ' unimaginable.'),
     SAME),
    # no wrapper: a first line that talks about the story is still the model's text
    ('write',
     ("The story is a reflection of the lost colony, where the colony's hydroponic garden became a dying"
      ' testament to the unsustainable practices of the past, leaving a legacy of despair. In the story,'
      " the narrative is a personal testament of the lost colony's impact, one that challenges the ways"
      ' of redemption and self-awareness.'),
     SAME),
]
