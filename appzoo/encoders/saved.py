"""A run's saved ``encoder/`` folder: the encoder's config and tokenizer
(its weights are saved with the whole model), written, checked and loaded here."""
import contextlib
import logging
import os

from appzoo.encoders.checks import check_encoder_folder, read_json_object
from appzoo.encoders.pretrained import load_tokenizer
from appzoo.errors import UserError, first_line


def save_encoder(encoder, tokenizer, folder):
    """Save config + tokenizer (the weights are saved with the whole model)."""
    os.makedirs(folder, exist_ok=True)
    # AutoConfig/AutoModel find the classes to rebuild through this field.
    encoder.config.architectures = [type(encoder).__name__]
    encoder.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def check_saved_encoder(folder):
    """Cheap checks of a folder written by :func:`save_encoder`; one UserError line naming the file."""
    if not os.path.isdir(folder):
        raise UserError(f"{folder}: no such folder; the saved run is incomplete")
    check_encoder_folder(folder, "", UserError, weights=False)
    _, config = read_json_object(os.path.join(folder, "config.json"), "", UserError)
    import paddlenlp.transformers as transformers

    names = config.get("architectures")
    if not (isinstance(names, list) and names and isinstance(getattr(transformers, str(names[0]), None), type)):
        raise UserError(f"{os.path.join(folder, 'config.json')}: architectures: {names!r} names no PaddleNLP "
                        f"model class; the saved run is damaged")


def load_encoder(folder):
    """Rebuild an encoder (random weights, to be overwritten by the model's
    state) and its tokenizer from a folder written by :func:`save_encoder`."""
    import paddlenlp.transformers as transformers

    check_saved_encoder(folder)
    with _paddlenlp_warnings_only():  # it logs each file it loads at INFO
        try:
            config = transformers.AutoConfig.from_pretrained(folder)
            model = getattr(transformers, config.architectures[0])(config)
        except Exception as e:  # the files passed the cheap checks; show what paddlenlp says
            raise UserError(f"{os.path.join(folder, 'config.json')}: the encoder cannot be rebuilt from it "
                            f"({type(e).__name__}: {first_line(e)}); the saved run is damaged") from None
        return model, load_tokenizer(folder, "", UserError)


@contextlib.contextmanager
def _paddlenlp_warnings_only():
    from paddlenlp.utils.log import logger

    level = logger.logger.level
    logger.logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.logger.setLevel(level)
